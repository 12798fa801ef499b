#include "kvgate/policy/prefill_fit.hpp"

#include <algorithm>
#include <cmath>

namespace kvgate::policy {
namespace {

constexpr double kTokensPerUnit = 1e3;  // feature 0: thousands of tokens
constexpr double kPairsPerUnit = 1e6;   // feature 1: millions of (query, context) token pairs
constexpr double kActivePerUnit = 1e5;  // feature 3: hundred thousands of context tokens decoding there
// feature 4: thousands of prompt tokens queued ahead (kTokensPerUnit)
// One standard deviation of a prior is this many times its value (weak: a
// 70B model is ~9x an 8B one per token), with floors for priors near zero.
constexpr double kPriorSpread = 10;
constexpr double kMinimumSpreadPerKiloToken = 10;  // ms
constexpr double kMinimumSpreadPerMegaPair = 2;    // ms
constexpr double kMinimumSpreadBase = 20;          // ms
constexpr double kMinimumSpreadPerActive = 20;     // ms per 100k active tokens
// Residuals are relative to the priors' prediction (see observe): the
// measurement noise assumed, and the floor of the clipping scale.
constexpr double kRelativeNoise = 0.2;
constexpr double kMinimumRelativeScale = 0.02;

double square(double value) {
  return value * value;
}

}  // namespace

PrefillFit::PrefillFit(const PrefillFitOptions& options) : options_(options) {
  const auto& prior = options.prior;
  prior_ = {prior.ms_per_token * kTokensPerUnit, prior.ms_per_token_pair * kPairsPerUnit, prior.base_ms,
            prior.ms_per_active_token * kActivePerUnit, prior.ms_per_queued_token * kTokensPerUnit};
  precision_ = {1 / square(std::max(kPriorSpread * prior_[0], kMinimumSpreadPerKiloToken)),
                1 / square(std::max(kPriorSpread * prior_[1], kMinimumSpreadPerMegaPair)),
                1 / square(std::max(kPriorSpread * prior_[2], kMinimumSpreadBase)),
                1 / square(std::max(kPriorSpread * prior_[3], kMinimumSpreadPerActive)),
                1 / square(std::max(kPriorSpread * prior_[4], kMinimumSpreadPerKiloToken))};
  floor_ = {0.01 * prior_[0], 0, 0, 0, 0};
  theta_ = prior_;
}

PrefillFit::Verdict PrefillFit::observe(const PrefillSample& sample) {
  if (sample.input_tokens == 0 || sample.cached_tokens > sample.input_tokens || !std::isfinite(sample.ttft_ms) ||
      sample.ttft_ms <= 0) {
    return Verdict::rejected;
  }
  const auto length = static_cast<double>(sample.input_tokens);
  const auto cached = static_cast<double>(sample.cached_tokens);
  Vector x{(length - cached) / kTokensPerUnit, (length * length - cached * cached) / 2 / kPairsPerUnit, 1.0,
           static_cast<double>(sample.active_tokens) / kActivePerUnit,
           static_cast<double>(sample.queued_tokens) / kTokensPerUnit};
  // Relative terms: each sample is divided by what the priors predict for
  // it, so a 30 s prefill and a 30 ms one weigh alike. The weight depends
  // on the priors only, so the problem stays a fixed weighted one.
  const auto& prior = options_.prior;
  const double weight = 1 / std::max(1.0, prior.prefill_ms(sample.input_tokens, sample.cached_tokens) +
                                              prior.queue_ms(sample.queued_tokens, sample.active_tokens));
  for (auto& feature : x) {
    feature *= weight;
  }
  double predicted = 0;
  for (std::size_t row = 0; row < kTerms; ++row) {
    predicted += theta_[row] * x[row];
  }
  double residual = sample.ttft_ms * weight - predicted;
  // Until the residual scale is known, it is taken from the samples (their
  // mean absolute residual) and nothing is clipped. After, a residual past
  // the bound is clipped to it, and the scale follows the clipped residuals:
  // a lasting change of speed raises it by 10% per sample until the samples
  // fit again, while a lone outlier moves it by 10% once.
  auto verdict = Verdict::used;
  if (samples_ >= options_.warmup_samples) {
    const double bound = options_.clip_scales * scale_;
    if (std::abs(residual) > bound) {
      residual = std::copysign(bound, residual);
      verdict = Verdict::clipped;
      ++clipped_;
    }
    scale_ = std::max(kMinimumRelativeScale, 0.95 * scale_ + 0.05 * std::abs(residual));
  } else {
    const auto seen = static_cast<double>(samples_);
    scale_ = std::max(kMinimumRelativeScale, (scale_ * seen + std::abs(residual)) / (seen + 1));
  }
  const double observed = predicted + residual;
  const double noise = kRelativeNoise * kRelativeNoise;
  for (std::size_t row = 0; row < kTerms; ++row) {
    for (std::size_t column = 0; column < kTerms; ++column) {
      gram_[row][column] = options_.forgetting * gram_[row][column] + x[row] * x[column] / noise;
    }
    moment_[row] = options_.forgetting * moment_[row] + x[row] * observed / noise;
  }
  ++samples_;
  solve();
  return verdict;
}

// (gram + diag(precision)) theta = moment + precision * prior, with the
// coefficients held at their floors where the unconstrained solution
// crosses them (at most one round per coefficient).
void PrefillFit::solve() {
  std::array<bool, kTerms> held{};
  for (std::size_t round = 0; round < kTerms; ++round) {
    Matrix system{};
    Vector rhs{};
    for (std::size_t row = 0; row < kTerms; ++row) {
      if (held[row]) {
        system[row][row] = 1;
        rhs[row] = floor_[row];
        continue;
      }
      rhs[row] = moment_[row] + precision_[row] * prior_[row];
      for (std::size_t column = 0; column < kTerms; ++column) {
        const double entry = gram_[row][column] + (row == column ? precision_[row] : 0);
        if (held[column]) {
          rhs[row] -= entry * floor_[column];
        } else {
          system[row][column] = entry;
        }
      }
    }
    // Gaussian elimination; the system is symmetric positive definite (the
    // priors' precision is on its diagonal), so no pivoting is needed.
    for (std::size_t pivot = 0; pivot < kTerms; ++pivot) {
      for (std::size_t row = pivot + 1; row < kTerms; ++row) {
        const double factor = system[row][pivot] / system[pivot][pivot];
        for (std::size_t column = pivot; column < kTerms; ++column) {
          system[row][column] -= factor * system[pivot][column];
        }
        rhs[row] -= factor * rhs[pivot];
      }
    }
    Vector solution{};
    for (std::size_t step = 0; step < kTerms; ++step) {
      const std::size_t row = kTerms - 1 - step;
      double value = rhs[row];
      for (std::size_t column = row + 1; column < kTerms; ++column) {
        value -= system[row][column] * solution[column];
      }
      solution[row] = value / system[row][row];
    }
    bool crossed = false;
    for (std::size_t row = 0; row < kTerms; ++row) {
      if (!held[row] && solution[row] < floor_[row]) {
        held[row] = true;
        crossed = true;
      }
    }
    if (!crossed) {
      theta_ = solution;
      return;
    }
  }
  theta_ = floor_;
}

PrefillRates PrefillFit::rates() const {
  return {theta_[0] / kTokensPerUnit, theta_[1] / kPairsPerUnit,  theta_[2], samples_,
          theta_[3] / kActivePerUnit, theta_[4] / kTokensPerUnit, scale_};
}

void SpeedFit::observe(double observed_over_predicted) {
  if (!(observed_over_predicted > 0) || !std::isfinite(observed_over_predicted)) {
    return;
  }
  const double log_ratio = std::clamp(std::log(observed_over_predicted), -kMaxLogRatio, kMaxLogRatio);
  weighted_sum_ = kForgetting * weighted_sum_ + log_ratio;
  weighted_squares_ = kForgetting * weighted_squares_ + log_ratio * log_ratio;
  weight_ = kForgetting * weight_ + 1;
  ++samples_;
}

double SpeedFit::speed() const {
  return std::exp(weighted_sum_ / (weight_ + kPriorWeight));
}

double SpeedFit::relative_noise() const {
  if (weight_ <= 0) {
    return 0;
  }
  const double mean = weighted_sum_ / weight_;
  const double variance = std::max(weighted_squares_ / weight_ - mean * mean, 0.0);
  return std::sqrt(variance / (weight_ + kPriorWeight));
}

}  // namespace kvgate::policy
