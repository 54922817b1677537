// sim/error.h: the user-error exception types. They are thrown during setup only (bad scenario,
// bad trace file, impossible topology) and turned into one clear message and exit status 2 by
// main. Simulator bugs are SIM_ASSERT failures; simulated failures are model state, never
// exceptions.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace sim {

// Any error caused by the user's input. what() is the complete one-line message.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg) : std::runtime_error(msg) {}
};

// A bad scenario: unknown key, wrong type, bad unit, out of range, impossible combination.
// The message names file, line, column and dotted key path where known.
class ConfigError : public UserError {
 public:
  explicit ConfigError(const std::string& msg) : UserError(msg) {}
};

// A malformed or unsupported trace file.
class TraceFormatError : public UserError {
 public:
  explicit TraceFormatError(const std::string& msg) : UserError(msg) {}
};

// A cluster shape that cannot be built (dimension 0, group larger than cluster, ...).
class TopologyError : public UserError {
 public:
  explicit TopologyError(const std::string& msg) : UserError(msg) {}
};

[[noreturn]] void assertion_failed(const char* cond, const char* file, int line, const std::string& why);

}  // namespace sim

// Internal invariant. Active in every build type: the checks sit outside the innermost loops.
#define SIM_ASSERT(cond, why)                                     \
  do {                                                            \
    if (!(cond)) ::sim::assertion_failed(#cond, __FILE__, __LINE__, (why)); \
  } while (0)
