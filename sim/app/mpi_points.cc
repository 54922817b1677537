#include "sim/app/mpi_points.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "sim/error.h"

#ifdef CLUSTERSIM_HAVE_MPI
#include <mpi.h>
#endif

namespace app {

#ifdef CLUSTERSIM_HAVE_MPI
namespace {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

// MPI is running in this process (started by MpiSession and not yet finished).
bool started() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init != 0 && fin == 0;
}

constexpr int kTagResult = 1;  // worker -> rank 0: int64 point (-1: none yet) + result text
constexpr int kTagWork = 2;    // rank 0 -> worker: int64 point index, -1: stop

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!launched_by_mpi()) return;
  MPI_Init(argc, argv);
  started_ = true;
}

MpiSession::~MpiSession() {
  if (started_) MPI_Finalize();
}

int mpi_size() {
  if (!started()) return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int mpi_rank() {
  if (!started()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::vector<std::string> mpi_run_points(const std::vector<size_t>& points, const std::function<std::string(size_t)>& run,
                                        const std::function<void(size_t)>& done) {
  const int size = mpi_size();
  if (mpi_rank() != 0) {
    // Ask for work with the previous result (none the first time) until told to stop.
    std::vector<char> msg(8);
    int64_t point = -1;
    std::memcpy(msg.data(), &point, 8);
    for (;;) {
      MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_CHAR, 0, kTagResult, MPI_COMM_WORLD);
      int64_t k = -1;
      MPI_Recv(&k, 1, MPI_INT64_T, 0, kTagWork, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (k < 0) return {};
      const std::string text = run(points[static_cast<size_t>(k)]);
      msg.resize(8 + text.size());
      std::memcpy(msg.data(), &k, 8);
      std::memcpy(msg.data() + 8, text.data(), text.size());
    }
  }
  std::vector<std::string> results(points.size());
  size_t next = 0, received = 0;
  int stopped = 0;
  std::vector<char> buf;
  while (stopped < size - 1) {
    MPI_Status st;
    MPI_Probe(MPI_ANY_SOURCE, kTagResult, MPI_COMM_WORLD, &st);
    int count = 0;
    MPI_Get_count(&st, MPI_CHAR, &count);
    buf.resize(static_cast<size_t>(count));
    MPI_Recv(buf.data(), count, MPI_CHAR, st.MPI_SOURCE, kTagResult, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int64_t k = -1;
    if (count >= 8) std::memcpy(&k, buf.data(), 8);
    if (k >= 0 && static_cast<size_t>(k) < results.size()) {
      results[static_cast<size_t>(k)].assign(buf.data() + 8, buf.size() - 8);
      if (done) done(++received);
    }
    int64_t give = next < points.size() ? static_cast<int64_t>(next++) : -1;
    if (give < 0) ++stopped;
    MPI_Send(&give, 1, MPI_INT64_T, st.MPI_SOURCE, kTagWork, MPI_COMM_WORLD);
  }
  return results;
}

void mpi_broadcast(std::vector<std::string>& texts) {
  if (mpi_size() <= 1) return;
  // Rank 0 packs: count, the lengths, then the bytes; one broadcast of the size, one of the buffer.
  std::vector<char> buf;
  if (mpi_rank() == 0) {
    const int64_t n = static_cast<int64_t>(texts.size());
    buf.resize(8 * (1 + texts.size()));
    std::memcpy(buf.data(), &n, 8);
    for (size_t i = 0; i < texts.size(); ++i) {
      const int64_t len = static_cast<int64_t>(texts[i].size());
      std::memcpy(buf.data() + 8 * (1 + i), &len, 8);
    }
    for (const std::string& t : texts) buf.insert(buf.end(), t.begin(), t.end());
  }
  int64_t bytes = static_cast<int64_t>(buf.size());
  MPI_Bcast(&bytes, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  buf.resize(static_cast<size_t>(bytes));
  if (bytes > INT32_MAX) throw sim::UserError("MPI: more than 2 GB of results to broadcast");
  MPI_Bcast(buf.data(), static_cast<int>(bytes), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (mpi_rank() == 0) return;
  int64_t n = 0;
  std::memcpy(&n, buf.data(), 8);
  texts.assign(static_cast<size_t>(n), {});
  size_t at = 8 * (1 + static_cast<size_t>(n));
  for (size_t i = 0; i < texts.size(); ++i) {
    int64_t len = 0;
    std::memcpy(&len, buf.data() + 8 * (1 + i), 8);
    texts[i].assign(buf.data() + at, static_cast<size_t>(len));
    at += static_cast<size_t>(len);
  }
}

#else  // no MPI in this build

MpiSession::MpiSession(int*, char***) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v); s != nullptr && std::strcmp(s, "1") != 0)
      throw sim::UserError(
          "launched by an MPI launcher, but this clustersim was built without MPI (install libopenmpi-dev and "
          "rebuild: scripts/setup.sh does)");
}
MpiSession::~MpiSession() = default;
int mpi_size() { return 1; }
int mpi_rank() { return 0; }
std::vector<std::string> mpi_run_points(const std::vector<size_t>& points, const std::function<std::string(size_t)>& run,
                                        const std::function<void(size_t)>& done) {
  std::vector<std::string> out;
  for (size_t i : points) {
    out.push_back(run(i));
    if (done) done(out.size());
  }
  return out;
}
void mpi_broadcast(std::vector<std::string>&) {}

#endif

}  // namespace app
