#pragma once
// A worker the metrics scraper watches, with its own schedule (the worker's
// scrape_interval / scrape_timeout, else metrics_scrape's).
#include <memory>
#include <string>

#include "kvgate/config/options.hpp"
#include "kvgate/workers/worker_state.hpp"

namespace kvgate::workers {

struct ScrapeTarget {
  std::shared_ptr<WorkerState> worker;
  Milliseconds interval;
  Milliseconds timeout;
  // models[].discover_adapters: the model whose adapters GET /v1/models
  // lists are read (every kAdapterPollMs); empty: not read.
  std::string discover_adapters_of;
};

}  // namespace kvgate::workers
