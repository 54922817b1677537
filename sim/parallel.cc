#include "sim/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace sim {

void parallel_for(size_t n, int threads, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr first;
  std::mutex m;
  auto worker = [&] {
    for (size_t i = next.fetch_add(1); i < n && !stop.load(); i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!first) first = std::current_exception();
        stop = true;
      }
    }
  };
  size_t k = std::min<size_t>(static_cast<size_t>(std::max(1, threads)), std::max<size_t>(1, n));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < k; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace sim
