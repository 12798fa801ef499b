#include "kvgate/obs/exposition.hpp"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <algorithm>

namespace kvgate::obs {

std::string status_label(int status) {
  return status == 0 ? "none" : std::to_string(status);
}

const prometheus::Histogram::BucketBoundaries& ratio_buckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets{0.1, 0.2, 0.3, 0.4,  0.5, 0.6,
                                                                0.7, 0.8, 0.9, 0.95, 0.99};
  return kBuckets;
}

Exposition::Exposition() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("kvgate_build_info")
      .Help("Always 1; the labels say which kvgate is running")
      .Register(*registry_)
      .Add({{"version", KVGATE_VERSION}})
      .Set(1);
}

std::string Exposition::serialize(std::span<const WorkerSeries* const> workers) const {
  // One family per name: the workers' registries hold the same families as
  // each other (and kvgate_requests_total as the request path's), merged here.
  auto families = registry_->Collect();
  for (const auto* worker : workers) {
    for (auto& family : worker->registry().Collect()) {
      auto same = std::find_if(families.begin(), families.end(),
                               [&](const prometheus::MetricFamily& known) { return known.name == family.name; });
      if (same == families.end()) {
        families.push_back(std::move(family));
      } else {
        same->metric.insert(same->metric.end(), std::make_move_iterator(family.metric.begin()),
                            std::make_move_iterator(family.metric.end()));
      }
    }
  }
  prometheus::TextSerializer serializer;
  return serializer.Serialize(families);
}

}  // namespace kvgate::obs
