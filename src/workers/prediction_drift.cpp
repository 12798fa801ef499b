#include "kvgate/workers/prediction_drift.hpp"

#include <algorithm>

namespace kvgate::workers {

DriftChange PredictionDrift::record(std::uint32_t predicted, std::uint32_t reported, std::uint64_t evicted_tokens,
                                    const DriftOptions& options) {
  if (!options.enabled) {
    const bool was = drifting_;
    ring_.clear();
    next_ = 0;
    drifting_ = false;
    return was ? DriftChange::ended : DriftChange::none;
  }
  if (predicted == 0 && reported == 0) {
    return DriftChange::none;
  }
  if (predicted > reported && evicted_tokens >= predicted - reported) {
    return DriftChange::none;
  }
  const std::size_t window = std::max<std::uint32_t>(options.window, 1);
  if (ring_.size() > window) {  // the window shrank on reload: keep the newest
    std::rotate(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_ % ring_.size()), ring_.end());
    ring_.erase(ring_.begin(), ring_.end() - static_cast<std::ptrdiff_t>(window));
    next_ = 0;
  }
  if (ring_.size() < window) {
    ring_.push_back({predicted, reported});
  } else {
    ring_[next_] = {predicted, reported};
    next_ = (next_ + 1) % window;
  }
  const auto seen = evidence();
  if (seen.samples < options.min_samples) {
    return DriftChange::none;
  }
  const double share = static_cast<double>(seen.over_predicted) / static_cast<double>(seen.samples);
  if (!drifting_ && share >= options.trip_share) {
    drifting_ = true;
    return DriftChange::started;
  }
  if (drifting_ && share <= options.recover_share) {
    drifting_ = false;
    return DriftChange::ended;
  }
  return DriftChange::none;
}

DriftEvidence PredictionDrift::evidence() const {
  DriftEvidence evidence;
  for (const auto& sample : ring_) {
    ++evidence.samples;
    evidence.over_predicted += sample.predicted > sample.reported ? 1 : 0;
    evidence.predicted_tokens += sample.predicted;
    evidence.reported_tokens += sample.reported;
  }
  return evidence;
}

}  // namespace kvgate::workers
