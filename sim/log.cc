#include "sim/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <string>

#include "sim/error.h"

namespace sim {

Log::Log(spdlog::level::level_enum level) : level_(level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_pattern("[%n] %l: %v");
  const char* names[] = {"sim", "topology", "workloads", "traces", "app"};
  for (size_t i = 0; i < loggers_.size(); ++i) {
    loggers_[i] = std::make_shared<spdlog::logger>(names[i], sink);
    loggers_[i]->set_level(level);
    loggers_[i]->flush_on(spdlog::level::trace);  // interleave with the command's own output
  }
}

spdlog::level::level_enum parse_log_level(std::string_view name) {
  if (name == "off") return spdlog::level::off;
  if (name == "error") return spdlog::level::err;
  if (name == "warn" || name == "warning") return spdlog::level::warn;
  if (name == "info") return spdlog::level::info;
  if (name == "debug") return spdlog::level::debug;
  if (name == "trace") return spdlog::level::trace;
  throw UserError("--log-level: expected one of off, error, warn, info, debug, trace, got \"" + std::string(name) + "\"");
}

}  // namespace sim
