#pragma once
// A worker the metrics scraper watches, with its own schedule (the worker's
// scrape_interval / scrape_timeout, else metrics_scrape's).
#include <memory>

#include "kvgate/config/options.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

struct ScrapeTarget {
  std::shared_ptr<WorkerState> worker;
  Milliseconds interval;
  Milliseconds timeout;
};

}  // namespace kvgate::workers
