#include "sim/error.h"

#include <cstdio>
#include <cstdlib>

namespace sim {

void assertion_failed(const char* cond, const char* file, int line, const std::string& why) {
  std::fprintf(stderr, "clustersim internal error: %s:%d: assertion '%s' failed: %s\n", file, line, cond,
               why.c_str());
  std::abort();
}

}  // namespace sim
