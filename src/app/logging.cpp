#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "kvgate/app/gateway.hpp"

namespace kvgate::app {

void setup_logging(const std::string& level) {
  // Logs go to stderr (stdout carries the machine-readable "listening"
  // line); one sink shared by the main and access loggers keeps lines whole.
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto main_logger = std::make_shared<spdlog::logger>("kvgate", sink);
  auto access_logger = std::make_shared<spdlog::logger>("access", sink);
  for (const auto& logger : {main_logger, access_logger}) {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %n %v", spdlog::pattern_time_type::utc);
  }
  spdlog::set_default_logger(main_logger);
  spdlog::register_logger(access_logger);
  set_log_level(level);
}

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  spdlog::apply_all([parsed](const std::shared_ptr<spdlog::logger>& logger) { logger->set_level(parsed); });
}

}  // namespace kvgate::app
