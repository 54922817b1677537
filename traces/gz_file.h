// traces/gz_file.h: a whole input file as bytes, gunzipped when it is gzip (zlib's gz* API reads
// plain files unchanged), for the trace readers.
#pragma once

#include <string>

namespace traces {

// Throws sim::UserError "PATH: cannot open" / "PATH: cannot read (...)".
std::string read_maybe_gzip(const std::string& path);

}  // namespace traces
