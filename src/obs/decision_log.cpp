#include "kvgate/obs/decision_log.hpp"

#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

namespace kvgate::obs {

namespace {
constexpr std::size_t kQueueLines = 16 * 1024;
}

Result<std::shared_ptr<DecisionLog>, std::string> DecisionLog::open(const std::string& path) {
  std::shared_ptr<DecisionLog> log(new DecisionLog());
  log->path_ = path;
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
    log->pool_ = std::make_shared<spdlog::details::thread_pool>(kQueueLines, 1);
    log->logger_ = std::make_shared<spdlog::async_logger>("decisions", sink, log->pool_,
                                                          spdlog::async_overflow_policy::overrun_oldest);
    log->logger_->set_pattern("%v");
    log->logger_->flush_on(spdlog::level::info);
  } catch (const spdlog::spdlog_ex& error) {
    return unexpected("cannot open decision log '" + path + "': " + error.what());
  }
  return log;
}

DecisionLog::~DecisionLog() {
  if (logger_) {
    logger_->flush();
  }
  logger_.reset();
  pool_.reset();  // joins the writer thread after it drained the queue
}

void DecisionLog::write(const std::string& line) {
  logger_->info(line);
}

std::uint64_t DecisionLog::dropped() const {
  return pool_ ? pool_->overrun_counter() : 0;
}

}  // namespace kvgate::obs
