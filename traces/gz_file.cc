#include "traces/gz_file.h"

#include <zlib.h>

#include "sim/error.h"

namespace traces {

std::string read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw sim::UserError(path + ": cannot open");
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  const std::string why = err < 0 && msg ? msg : "";
  gzclose(f);
  if (n < 0 || err < 0) throw sim::UserError(path + ": cannot read (" + why + ")");
  return out;
}

}  // namespace traces
