// sim/parallel.h: runs independent jobs (scenarios, validation rows, sweep points) on threads.
//
// Every index in [0, n) is run exactly once, by whichever worker takes it next (dynamic
// scheduling: costs differ by orders of magnitude between scenarios). Callers write results into
// slot i only, so the output does not depend on the thread count or on timing. Each job builds its
// own sim::Simulation: nothing is shared between them but what the caller shares read-only.
#pragma once

#include <cstddef>
#include <functional>

namespace sim {

// Runs body(i) for every i in [0, n) on min(threads, n) threads (the caller's thread is one of
// them; threads < 1 counts as 1), in increasing i as workers become free. An exception thrown by
// body ends the run: the other workers finish their current index, take no more, and the first
// exception is rethrown here.
void parallel_for(size_t n, int threads, const std::function<void(size_t)>& body);

}  // namespace sim
