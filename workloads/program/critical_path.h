// workloads/program/critical_path.h: why a rank finished when it did, from a run's op times
// (ExecutorOptions::record_op_times).
//
// The path starts at the rank's last op to end and walks back: from an op to the dependency that
// ended last (its stream predecessor or an explicit dependency); at a collective of an explicit
// communicator (JobProgram::comms with members; traces use them), to the member that arrived last,
// the collective itself counting only from that arrival to its end (the time the others waited is
// not on the path). Each op's own time goes to its category; time between a dependency's end and
// the op's start (nothing on the path ran) goes to `waiting_s`. A collective of a generated
// communicator, and a receive, are followed locally (the path does not cross to the peer).
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/program/executor.h"
#include "workloads/program/program.h"

namespace wl {

struct CriticalPath {
  double length_s = 0;                // first op's start (or 0) to the rank's end: its end time
  std::vector<double> category_s;     // by JobProgram::categories: op time on the path
  double waiting_s = 0;               // gaps on the path where no op ran
  std::vector<double> rank_s;         // by rank: time of the path spent on that rank's ops
  size_t ops = 0;                     // ops on the path
};

// `times` as ProgramRun::op_times. Rank `rank` must have finished.
CriticalPath critical_path(const JobProgram& job, const std::vector<std::vector<OpTimes>>& times, uint32_t rank);

}  // namespace wl
