// sim/log.h: diagnostics, never data. One spdlog logger per layer (sim, topology, workloads,
// traces, app), each writing "[layer] level: message" to stderr, without timestamps (a run's
// stderr is as deterministic as its outputs). The command owns one Log and hands it to what it
// builds (Simulation::set_log; readers' options); no logger is registered globally, and code
// given no Log logs nothing. Levels as spdlog names them: off, error, warn (the default: a normal
// run says nothing), info (what was bound, built and run), debug (every collective lowered, every
// failure injected), trace.
#pragma once

#include <spdlog/logger.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

namespace sim {

enum class Layer : uint8_t { kSim, kTopology, kWorkloads, kTraces, kApp };

class Log {
 public:
  explicit Log(spdlog::level::level_enum level = spdlog::level::warn);
  spdlog::logger& at(Layer layer) { return *loggers_[static_cast<size_t>(layer)]; }
  spdlog::level::level_enum level() const { return level_; }
  bool enabled(spdlog::level::level_enum l) const { return l >= level_ && level_ != spdlog::level::off; }

 private:
  spdlog::level::level_enum level_;
  std::array<std::shared_ptr<spdlog::logger>, 5> loggers_;
};

// "off", "error", "warn", "info", "debug" or "trace"; throws sim::UserError naming the choices.
spdlog::level::level_enum parse_log_level(std::string_view name);

}  // namespace sim
