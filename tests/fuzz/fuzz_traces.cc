// libFuzzer target: the trace readers on any bytes. The first byte picks the reader: a PyTorch
// profiler (Kineto) trace, then replayed alone (traces/kineto/kineto.h); a Chakra execution trace,
// then made a program (traces/chakra/chakra.h); a PyTorch execution trace's collectives
// (traces/pytorch_et/execution_trace.h); with bit 2 of the first byte the Kineto trace is read as
// calibrate reads it, CPU ops and kernel samples included. The rest is the file (the readers take paths; gzip'ed or
// not). A bad file must end as sim::UserError (one line, exit 2 in the CLI); anything else (an
// assertion, a signal, a sanitizer report, a timeout, a leak) is a bug. Build and run with
// scripts/fuzz.sh.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/error.h"
#include "traces/chakra/chakra.h"
#include "traces/kineto/kineto.h"
#include "traces/kineto/samples.h"
#include "traces/pytorch_et/execution_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string path = "/tmp/clustersim-fuzz-traces-" + std::to_string(::getpid());
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data + 1, 1, size - 1, f);
    std::fclose(f);
  } else {
    return 0;
  }
  try {
    switch (data[0] % 3) {
      case 0: {
        traces::KinetoReadOptions ko;
        ko.ops = (data[0] & 4) != 0;  // calibrate's reading, with the CPU ops
        std::vector<traces::KinetoRank> ranks{traces::read_kineto(path, ko)};
        if (ko.ops) {  // what calibrate takes from a trace
          (void)traces::kernel_samples(ranks[0], 0);
          (void)traces::launch_intervals(ranks[0]);
          (void)traces::queued_kernel_gaps(ranks[0]);
        }
        (void)traces::replay_program(ranks);
        break;
      }
      case 1: {
        std::vector<traces::ChakraRank> ranks{traces::read_chakra(path)};
        (void)traces::chakra_program(ranks);
        break;
      }
      default: (void)traces::read_et_collectives(path); break;
    }
  } catch (const sim::UserError&) {
  }
  return 0;
}
