// workloads/training/stage_emitter.h: the pieces that build one pipeline stage's Program, shared by
// the pipeline walker (training.cc) and the data-parallel policies (data_parallel.h). Internal to
// workloads/training/.
//
// The emitter appends ops to the stage's Program on training's streams with training's categories.
// Its *frontier* is the set of ops the next compute op must wait for (received activations,
// gathered parameters, the collective that ended a compute segment); a compute op consumes it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "workloads/program/program.h"
#include "workloads/training/training.h"

namespace wl {

// A compute segment's cost alone on an idle GPU: its time, the seconds its FLOPs and its HBM bytes
// would take alone (their ratio to `seconds` is the load on the SM pool and on HBM), model FLOPs.
struct Cost {
  double seconds = 0, sm_s = 0, hbm_s = 0, model_flops = 0;
  bool empty() const { return seconds <= 0; }
};

// Parameters per rank of each model chunk: its layers, plus the embedding on the first chunk and
// the final norm and head on the last.
struct ParamSplit {
  std::vector<int64_t> chunk_layers;
  double layer = 0, embed = 0, head = 0;  // parameters per rank
  double layer_gather_bytes = 0;           // a layer's FSDP all-gather per rank (training.cc)
  double chunk(int64_t g) const {
    auto last = static_cast<int64_t>(chunk_layers.size()) - 1;
    return static_cast<double>(chunk_layers[static_cast<size_t>(g)]) * layer + (g == 0 ? embed : 0) +
           (g == last ? head : 0);
  }
};

// Where one stage's model chunks sit: chunk c of stage s is global chunk c * stages + s.
struct StageShape {
  int32_t stage = 0, stages = 1, micro_batches = 1, virtual_stages = 1;
  std::vector<int64_t> chunk_layers;  // per global chunk
  std::vector<int64_t> first_layer;   // per global chunk (and one past the last)
  int32_t global(int32_t chunk) const { return chunk * stages + stage; }
  int32_t last_global() const { return static_cast<int32_t>(chunk_layers.size()) - 1; }
};

class StageEmitter {
 public:
  explicit StageEmitter(const TrainingJob& job);

  Program& program() { return p_; }
  const TrainingJob& job() const { return job_; }
  // The dimension has more than one rank (its collectives do something).
  bool has(Dim d) const;

  // A compute kernel waiting for the frontier (which it clears); returns its index. The executor
  // costs it from `terms` and the hardware profile; `c` (the same evaluated by the builder) gives
  // its model FLOPs. The terms are stored once per distinct list (recipes repeat per micro-batch).
  uint32_t add_compute(const Cost& c, const std::vector<CostTerm>& terms, const std::string& name,
                       TrainingCategory cat, int32_t mb, int32_t layer);
  // A kernel on the stream of dimension d's collectives (work a communication library or framework
  // runs there before a collective, as FSDP2's reduce-scatter copy-in), after `deps`; it leaves the
  // frontier alone. `terms` must outlive the emitter, as add_compute's.
  uint32_t add_side_kernel(Dim d, const std::vector<CostTerm>& terms, const std::string& name, TrainingCategory cat,
                           int32_t mb, int32_t layer, const std::vector<uint32_t>& deps);
  // A collective along dimension d on its stream, after `deps`.
  // `copy_engines`: its bytes move by copy engines, holding no SM (CollectiveEngine).
  uint32_t add_collective(Dim d, CollectiveOp coll, double bytes, const std::string& name, int32_t mb, int32_t layer,
                          const std::vector<uint32_t>& deps, bool copy_engines = false);
  void wait_for(uint32_t op) { frontier_.push_back(op); }
  std::vector<uint32_t>& frontier() { return frontier_; }
  int64_t last_compute() const { return last_compute_; }

  // Pipeline messages to the stage `peer` = +1 (next) or -1 (previous) along pp, wrapping around.
  void recv(int8_t peer, uint32_t message, int32_t mb, const std::string& what);
  void send(int8_t peer, uint32_t message, double bytes, const std::string& what, int32_t mb);


 private:
  const TrainingJob& job_;
  Program p_;
  std::vector<uint32_t> frontier_;
  int64_t last_compute_ = -1;
  std::unordered_map<const std::vector<CostTerm>*, uint32_t> term_index_;
};

}  // namespace wl
