// sim/app/mpi_points.h: points of a sweep spread over the ranks of an MPI job (`mpirun -n K
// clustersim sweep ...`; Open MPI, an optional build feature: CLUSTERSIM_HAVE_MPI).
//
// Rank 0 coordinates: it hands out point indices one at a time to whichever rank asks next (points
// cost up to 1000x each other, so a static split would leave ranks idle) and gathers each point's
// result text; ranks 1..K-1 run points. MPI is started only when the process was launched by an
// MPI launcher (its environment names a world size), so a plain `clustersim` never touches it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace app {

// Starts MPI when launched by mpirun (and the build has it); finishes it when destroyed.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

 private:
  bool started_ = false;  // this process called MPI_Init
};

// Ranks in the job: 1 without MPI (or a one-rank job).
int mpi_size();
int mpi_rank();

// Runs run(i) for every i in `points` over the job's ranks (at least 2). On rank 0: every result,
// in the order of `points`; `done(n)` is called there as results arrive. On the other ranks: an
// empty vector.
std::vector<std::string> mpi_run_points(const std::vector<size_t>& points, const std::function<std::string(size_t)>& run,
                                        const std::function<void(size_t)>& done);

// Rank 0's `texts` on every rank (a campaign's trials: every rank summarises the same results).
void mpi_broadcast(std::vector<std::string>& texts);

}  // namespace app
