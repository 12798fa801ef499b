#include "kvgate/config/loader.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>

#include "kvgate/config/option_table.hpp"
#include "kvgate/core/file.hpp"
#include "yaml_reader.hpp"

namespace kvgate::config {
namespace {

using detail::YamlReader;

std::string indexed(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

void read_address(YamlReader& reader, const YAML::Node& node, const std::string& path, HostPort& out) {
  std::string text;
  reader.read(node, path, text);
  if (!node.IsScalar()) {
    return;
  }
  auto address = parse_listen_address(text);
  if (!address) {
    reader.problem(node, path, "invalid address '" + text + "': " + address.error());
  } else {
    out = *address;
  }
}

void read_limits(YamlReader& reader, const YAML::Node& node, LimitOptions& out) {
  if (!reader.check_mapping(node, "limits", keys_under("limits"))) {
    return;
  }
  reader.optional(node, "limits", "max_body_size", [&](auto& value, auto path) {
    reader.read_byte_size(value, path, out.max_body_bytes, 1024, std::uint64_t{1} << 32);
  });
  reader.optional(node, "limits", "max_header_size", [&](auto& value, auto path) {
    std::uint64_t bytes = out.max_header_bytes;
    reader.read_byte_size(value, path, bytes, 1024, 1024 * 1024);
    out.max_header_bytes = static_cast<std::uint32_t>(bytes);
  });
  reader.optional(node, "limits", "max_header_fields",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_header_fields, 8, 10'000); });
  reader.optional(node, "limits", "max_connections",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_connections, 1, 1'000'000); });
}

void read_timeouts(YamlReader& reader, const YAML::Node& node, TimeoutOptions& out) {
  const std::pair<const char*, Milliseconds*> fields[] = {
      {"header_read", &out.header_read},           {"body_read", &out.body_read},
      {"keep_alive_idle", &out.keep_alive_idle},   {"client_write", &out.client_write},
      {"upstream_connect", &out.upstream_connect}, {"upstream_response", &out.upstream_response},
      {"upstream_idle", &out.upstream_idle},       {"shutdown_grace", &out.shutdown_grace},
      {"prefill_response", &out.prefill_response},
  };
  if (!reader.check_mapping(node, "timeouts", keys_under("timeouts"))) {
    return;
  }
  for (const auto& field : fields) {
    reader.optional(node, "timeouts", field.first,
                    [&](auto& value, auto path) { reader.read_duration(value, path, *field.second, Milliseconds(1)); });
  }
}

void read_upstream(YamlReader& reader, const YAML::Node& node, UpstreamOptions& out) {
  if (!reader.check_mapping(node, "upstream", keys_under("upstream"))) {
    return;
  }
  reader.optional(node, "upstream", "retries",
                  [&](auto& value, auto path) { reader.read(value, path, out.retries, 0, 10); });
  reader.optional(node, "upstream", "retry_budget", [&](auto& budget, auto) {
    const std::string base = "upstream.retry_budget";
    if (!reader.check_mapping(budget, base, keys_under("upstream.retry_budget"))) {
      return;
    }
    reader.optional(budget, base, "ratio",
                    [&](auto& value, auto path) { reader.read(value, path, out.retry_budget.ratio, 0.0, 10.0); });
    reader.optional(budget, base, "min_retries_per_second", [&](auto& value, auto path) {
      reader.read(value, path, out.retry_budget.min_retries_per_second, 0.0, 1e6);
    });
  });
  reader.optional(node, "upstream", "max_idle_connections",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_idle_connections, 0, 100'000); });
  reader.optional(node, "upstream", "idle_connection_timeout", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.idle_connection_timeout, Milliseconds(1));
  });
}

void read_health_check(YamlReader& reader, const YAML::Node& node, HealthCheckOptions& out) {
  if (!reader.check_mapping(node, "health_check", keys_under("health_check"))) {
    return;
  }
  const std::string base = "health_check";
  reader.optional(node, base, "enabled", [&](auto& value, auto path) { reader.read(value, path, out.enabled); });
  reader.optional(node, base, "path", [&](auto& value, auto path) {
    reader.read(value, path, out.path);
    if (!out.path.starts_with('/')) {
      reader.problem(value, path, "must start with '/'");
    }
  });
  reader.optional(node, base, "interval",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.interval, Milliseconds(10)); });
  reader.optional(node, base, "timeout",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.timeout, Milliseconds(1)); });
  reader.optional(node, base, "unhealthy_threshold",
                  [&](auto& value, auto path) { reader.read(value, path, out.unhealthy_threshold, 1, 1000); });
  reader.optional(node, base, "healthy_threshold",
                  [&](auto& value, auto path) { reader.read(value, path, out.healthy_threshold, 1, 1000); });
  reader.optional(node, base, "passive_failures", [&](auto& value, auto path) {
    std::uint32_t failures = 0;
    reader.read(value, path, failures, 0, 1000);
    out.passive_failures = failures;
  });
}

void read_outlier_detection(YamlReader& reader, const YAML::Node& node, OutlierDetectionOptions& out) {
  const std::string base = "outlier_detection";
  if (!reader.check_mapping(node, base, keys_under("outlier_detection"))) {
    return;
  }
  reader.optional(node, base, "consecutive_failures",
                  [&](auto& value, auto path) { reader.read(value, path, out.consecutive_failures, 0, 1000); });
  reader.optional(node, base, "base_ejection_time", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.base_ejection_time, Milliseconds(1));
  });
  reader.optional(node, base, "max_ejection_time", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.max_ejection_time, Milliseconds(1));
    if (value.IsScalar() && out.max_ejection_time < out.base_ejection_time) {
      reader.problem(value, path, "must not be shorter than base_ejection_time");
    }
  });
  reader.optional(node, base, "max_ejected_percent",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_ejected_percent, 0, 100); });
}

void read_metrics_scrape(YamlReader& reader, const YAML::Node& node, MetricsScrapeOptions& out) {
  const std::string base = "metrics_scrape";
  if (!reader.check_mapping(node, base, keys_under("metrics_scrape"))) {
    return;
  }
  reader.optional(node, base, "enabled", [&](auto& value, auto path) { reader.read(value, path, out.enabled); });
  reader.optional(node, base, "path", [&](auto& value, auto path) {
    reader.read(value, path, out.path);
    if (!out.path.starts_with('/')) {
      reader.problem(value, path, "must start with '/'");
    }
  });
  reader.optional(node, base, "interval",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.interval, Milliseconds(100)); });
  reader.optional(node, base, "timeout",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.timeout, Milliseconds(1)); });
  reader.optional(node, base, "max_backoff", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.max_backoff, Milliseconds(100));
  });
}

void read_cache_aware(YamlReader& reader, const YAML::Node& node, CacheAwareOptions& out) {
  const std::string base = "routing.cache_aware";
  if (!reader.check_mapping(node, base, keys_under("routing.cache_aware"))) {
    return;
  }
  reader.optional(node, base, "prefill_ms_per_token",
                  [&](auto& value, auto path) { reader.read(value, path, out.prefill_ms_per_token, 1e-6, 1000.0); });
  reader.optional(node, base, "prefill_ms_per_token_pair",
                  [&](auto& value, auto path) { reader.read(value, path, out.prefill_ms_per_token_pair, 0.0, 1.0); });
  reader.optional(node, base, "prefill_base_ms",
                  [&](auto& value, auto path) { reader.read(value, path, out.prefill_base_ms, 0.0, 60'000.0); });
  reader.optional(node, base, "prefill_ms_per_active_token",
                  [&](auto& value, auto path) { reader.read(value, path, out.prefill_ms_per_active_token, 0.0, 1.0); });
  reader.optional(node, base, "learn_prefill_cost",
                  [&](auto& value, auto path) { reader.read(value, path, out.learn_prefill_cost); });
  reader.optional(node, base, "prefill_fit", [&](auto& value, auto path) {
    std::string scope;
    reader.read(value, path, scope);
    if (scope == "relative") {
      out.prefill_fit = PrefillFitScope::relative;
    } else if (scope == "pooled") {
      out.prefill_fit = PrefillFitScope::pooled;
    } else if (scope == "per_worker") {
      out.prefill_fit = PrefillFitScope::per_worker;
    } else if (value.IsScalar()) {
      reader.problem(value, path, "unknown prefill_fit '" + scope + "' (relative, pooled, per_worker)");
    }
  });
  reader.optional(node, base, "eviction_term",
                  [&](auto& value, auto path) { reader.read(value, path, out.eviction_term); });
  reader.optional(node, base, "move_margin",
                  [&](auto& value, auto path) { reader.read(value, path, out.move_margin); });
  reader.optional(node, base, "congestion_cost",
                  [&](auto& value, auto path) { reader.read(value, path, out.congestion_cost); });
  reader.optional(node, base, "own_prefill_weight", [&](auto& value, auto path) {
    double weight = std::numeric_limits<double>::quiet_NaN();  // left so when refused
    reader.read(value, path, weight, 0.1, 10.0);
    if (std::isfinite(weight)) {
      out.own_prefill_weight = weight;
    }
  });
  reader.optional(node, base, "soft_margin", [&](auto& value, auto path) {
    Milliseconds margin{0};
    reader.read_duration(value, path, margin, Milliseconds(0));
    out.soft_margin = margin;
  });
  reader.optional(node, base, "load_bound_epsilon",
                  [&](auto& value, auto path) { reader.read(value, path, out.load_bound_epsilon, 0.0, 10.0); });
  reader.optional(node, base, "queue_ms_per_request",
                  [&](auto& value, auto path) { reader.read(value, path, out.queue_ms_per_request, 0.0, 1e6); });
  reader.optional(node, base, "queue_ms_per_waiting_request", [&](auto& value, auto path) {
    reader.read(value, path, out.queue_ms_per_waiting_request, 0.0, 1e6);
  });
  reader.optional(node, base, "engine_metrics_max_age", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.engine_metrics_max_age, Milliseconds(1));
  });
}

void read_drift(YamlReader& reader, const YAML::Node& node, DriftOptions& out) {
  const std::string base = "routing.drift";
  if (!reader.check_mapping(node, base, keys_under("routing.drift"))) {
    return;
  }
  reader.optional(node, base, "enabled", [&](auto& value, auto path) { reader.read(value, path, out.enabled); });
  reader.optional(node, base, "window",
                  [&](auto& value, auto path) { reader.read(value, path, out.window, 1, 10'000); });
  reader.optional(node, base, "min_samples",
                  [&](auto& value, auto path) { reader.read(value, path, out.min_samples, 1, 10'000); });
  reader.optional(node, base, "trip_share",
                  [&](auto& value, auto path) { reader.read(value, path, out.trip_share, 0.0, 1.0); });
  reader.optional(node, base, "recover_share",
                  [&](auto& value, auto path) { reader.read(value, path, out.recover_share, 0.0, 1.0); });
  if (out.min_samples > out.window) {
    reader.problem(node, base + ".min_samples", "must not exceed routing.drift.window");
  }
  if (out.recover_share >= out.trip_share) {
    reader.problem(node, base + ".recover_share", "must be below routing.drift.trip_share");
  }
}

// "header:NAME" (an HTTP token, matched case-insensitively) or "body:NAME"
// (a top-level string field of the request body).
Result<SessionKeySource, std::string> parse_session_key_source(std::string_view text) {
  const auto colon = text.find(':');
  const auto place = text.substr(0, colon);
  if (colon == std::string_view::npos || (place != "header" && place != "body")) {
    return unexpected(std::string("'") + std::string(text) + "' is not header:NAME or body:NAME");
  }
  auto name = std::string(text.substr(colon + 1));
  if (name.empty() || name.size() > 128) {
    return unexpected(std::string("'") + std::string(text) + "': the name must hold 1 to 128 characters");
  }
  if (place == "body") {
    return session_key_source(SessionKeyPlace::body, name);
  }
  static constexpr std::string_view kTokenPunctuation = "!#$%&'*+-.^_`|~";
  for (char& c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) == 0 && kTokenPunctuation.find(c) == std::string_view::npos) {
      return unexpected(std::string("'") + std::string(text) + "': not an HTTP header name");
    }
    c = static_cast<char>(std::tolower(byte));
  }
  return session_key_source(SessionKeyPlace::header, name);
}

void read_sessions(YamlReader& reader, const YAML::Node& node, SessionOptions& out) {
  const std::string base = "sessions";
  if (!reader.check_mapping(node, base, keys_under("sessions"))) {
    return;
  }
  reader.optional(node, base, "max_sessions",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_sessions, 1, 100'000'000); });
  reader.optional(node, base, "idle_ttl",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.idle_ttl, Milliseconds(1)); });
  reader.optional(node, base, "turns_kept",
                  [&](auto& value, auto path) { reader.read(value, path, out.turns_kept, 1, 1'000); });
  reader.optional(node, base, "key_from", [&](auto& value, auto path) {
    if (!reader.check_sequence(value, path)) {
      return;
    }
    if (value.size() > kMaxSessionKeySources) {
      reader.problem(value, path, "at most " + std::to_string(kMaxSessionKeySources) + " sources");
      return;
    }
    out.key_from.clear();
    for (std::size_t index = 0; index < value.size(); ++index) {
      std::string text;
      const auto item_path = indexed(path, index);
      reader.read(value[index], item_path, text);
      if (auto source = parse_session_key_source(text)) {
        if (std::find(out.key_from.begin(), out.key_from.end(), *source) != out.key_from.end()) {
          reader.problem(value[index], item_path, "'" + text + "' is listed twice");
        }
        out.key_from.push_back(std::move(*source));
      } else {
        reader.problem(value[index], item_path, source.error());
      }
    }
  });
}

void read_routing(YamlReader& reader, const YAML::Node& node, RoutingOptions& out) {
  if (!reader.check_mapping(node, "routing", keys_under("routing"))) {
    return;
  }
  reader.optional(node, "routing", "policy", [&](auto& value, auto path) {
    std::string name;
    reader.read(value, path, name);
    std::string known;
    for (auto kind : kPolicyKinds) {
      if (name == to_string(kind)) {
        out.policy = kind;
        return;
      }
      known += (known.empty() ? "" : ", ") + std::string(to_string(kind));
    }
    if (value.IsScalar()) {
      reader.problem(value, path, "unknown policy '" + name + "' (" + known + ")");
    }
  });
  reader.optional(node, "routing", "dynamo_cost", [&](auto& value, auto) {
    if (!reader.check_mapping(value, "routing.dynamo_cost", keys_under("routing.dynamo_cost"))) {
      return;
    }
    reader.optional(value, "routing.dynamo_cost", "overlap_weight", [&](auto& weight, auto path) {
      reader.read(weight, path, out.dynamo_overlap_weight, 0.0, 1000.0);
    });
  });
  reader.optional(node, "routing", "sglang_cache_aware", [&](auto& value, auto) {
    const std::string base = "routing.sglang_cache_aware";
    if (!reader.check_mapping(value, base, keys_under("routing.sglang_cache_aware"))) {
      return;
    }
    reader.optional(value, base, "cache_threshold",
                    [&](auto& field, auto path) { reader.read(field, path, out.sglang_cache_threshold, 0.0, 1.0); });
    reader.optional(value, base, "balance_abs_threshold", [&](auto& field, auto path) {
      reader.read(field, path, out.sglang_balance_abs_threshold, 0, 1'000'000);
    });
    reader.optional(value, base, "balance_rel_threshold", [&](auto& field, auto path) {
      reader.read(field, path, out.sglang_balance_rel_threshold, 1.0, 1000.0);
    });
  });
  reader.optional(node, "routing", "prefix_hash", [&](auto& value, auto) {
    if (!reader.check_mapping(value, "routing.prefix_hash", keys_under("routing.prefix_hash"))) {
      return;
    }
    reader.optional(value, "routing.prefix_hash", "prefix_blocks",
                    [&](auto& blocks, auto path) { reader.read(blocks, path, out.prefix_hash_blocks, 1, 1'000'000); });
  });
  reader.optional(node, "routing", "cache_aware",
                  [&](auto& value, auto) { read_cache_aware(reader, value, out.cache_aware); });
  reader.optional(node, "routing", "receipt", [&](auto& value, auto path) { reader.read(value, path, out.receipt); });
  reader.optional(node, "routing", "drift", [&](auto& value, auto) { read_drift(reader, value, out.drift); });
}

void read_index(YamlReader& reader, const YAML::Node& node, IndexOptions& out) {
  if (!reader.check_mapping(node, "index", keys_under("index"))) {
    return;
  }
  reader.optional(node, "index", "max_entries",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_entries, 1'000, 2'000'000'000); });
  reader.optional(node, "index", "speculative_ttl", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.speculative_ttl, Milliseconds(1));
  });
  reader.optional(node, "index", "approximate_ttl", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.approximate_ttl, Milliseconds(1));
  });
  reader.optional(node, "index", "default_kv_capacity_blocks", [&](auto& value, auto path) {
    reader.read(value, path, out.default_kv_capacity_blocks, 1, 1'000'000'000);
  });
}

void read_kv_events(YamlReader& reader, const YAML::Node& node, KvEventOptions& out) {
  if (!reader.check_mapping(node, "kv_events", keys_under("kv_events"))) {
    return;
  }
  reader.optional(node, "kv_events", "replay_timeout", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.replay_timeout, Milliseconds(10));
  });
  reader.optional(node, "kv_events", "silence_after", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.silence_after, Milliseconds(100));
  });
  reader.optional(node, "kv_events", "listen", [&](auto& value, auto path) {
    reader.read(value, path, out.listen);
    // Empty: no listener (the default, as the example file writes it).
    if (value.IsScalar() && !out.listen.empty() && !out.listen.starts_with("tcp://") &&
        !out.listen.starts_with("ipc://")) {
      reader.problem(value, path, "expected a ZMQ address to bind, such as tcp://0.0.0.0:5557");
    }
  });
}

void read_cluster(YamlReader& reader, const YAML::Node& node, ClusterOptions& out) {
  const std::string base = "cluster";
  if (!reader.check_mapping(node, base, keys_under("cluster"))) {
    return;
  }
  reader.optional(node, base, "engine", [&](auto& value, auto path) {
    reader.read(value, path, out.engine);
    if (value.IsScalar() && out.engine != "redis") {
      reader.problem(
          value, path,
          "unknown engine '" + out.engine + "' (redis: Redis 7 or Valkey; docs/design.md says why not NATS)");
    }
  });
  reader.optional(node, base, "url", [&](auto& value, auto path) {
    std::string text;
    reader.read(value, path, text);
    if (!value.IsScalar()) {
      return;
    }
    constexpr std::string_view kScheme = "redis://";
    auto address = text.starts_with(kScheme) ? parse_listen_address(std::string_view(text).substr(kScheme.size()))
                                             : Result<HostPort, std::string>(unexpected(std::string("no scheme")));
    if (!address || address->port == 0 || address->host.empty()) {
      reader.problem(value, path, "expected redis://host:port, such as redis://127.0.0.1:6379");
    } else {
      out.url = *address;
    }
  });
  reader.optional(node, base, "replica_id", [&](auto& value, auto path) {
    reader.read(value, path, out.replica_id);
    const bool valid = std::all_of(out.replica_id.begin(), out.replica_id.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == ':' || c == '-';
    });
    if (value.IsScalar() && (!valid || out.replica_id.size() > 64)) {
      reader.problem(value, path, "at most 64 letters, digits, . _ : -");
    }
  });
  reader.optional(node, base, "stream", [&](auto& value, auto path) {
    reader.read(value, path, out.stream);
    if (value.IsScalar() && (out.stream.empty() || out.stream.size() > 200)) {
      reader.problem(value, path, "a Redis key of 1 to 200 bytes");
    }
  });
  reader.optional(node, base, "max_stream_entries", [&](auto& value, auto path) {
    reader.read(value, path, out.max_stream_entries, 1'000, 100'000'000);
  });
  reader.optional(node, base, "catch_up",
                  [&](auto& value, auto path) { reader.read_duration(value, path, out.catch_up, Milliseconds(0)); });
  reader.optional(node, base, "load_interval", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.load_interval, Milliseconds(5));
  });
  reader.optional(node, base, "peer_timeout", [&](auto& value, auto path) {
    reader.read_duration(value, path, out.peer_timeout, Milliseconds(100));
  });
  reader.optional(node, base, "queue",
                  [&](auto& value, auto path) { reader.read(value, path, out.queue, 16, 1'000'000); });
  if (out.peer_timeout <= out.load_interval * 2 && node["peer_timeout"]) {
    reader.problem(node["peer_timeout"], base + ".peer_timeout",
                   "must be more than twice load_interval (a peer publishes its counts every load_interval)");
  }
}

// A secret's text from a file (trailing newline and blanks dropped) or an
// environment variable. Problems name the file or variable, never the text.
std::optional<std::string> read_secret(YamlReader& reader, const YAML::Node& node, const std::string& path,
                                       bool from_file) {
  std::string source;
  reader.read(node, path, source);
  if (!node.IsScalar()) {
    return std::nullopt;
  }
  std::string secret;
  if (from_file) {
    // Bounded: a path to a device or a huge file must not hang the load.
    constexpr std::size_t kMaxSecretBytes = 4096;
    auto contents = read_whole_file(source, kMaxSecretBytes);
    if (!contents) {
      reader.problem(node, path,
                     contents.error().failure == FileFailure::too_large
                         ? "'" + source + "' is larger than 4 KiB: not a key or secret file"
                         : contents.error().message);  // names the path and what failed
      return std::nullopt;
    }
    secret = std::move(*contents);
  } else {
    const char* value = source.empty() ? nullptr : std::getenv(source.c_str());
    if (value == nullptr) {
      reader.problem(node, path, "the environment variable '" + source + "' is not set");
      return std::nullopt;
    }
    secret = value;
  }
  while (!secret.empty() &&
         (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ' || secret.back() == '\t')) {
    secret.pop_back();
  }
  if (secret.empty()) {
    reader.problem(node, path, std::string(from_file ? "the file '" : "the variable '") + source + "' is empty");
    return std::nullopt;
  }
  return secret;
}

// `<prefix>_file` or `<prefix>_env` of `node`, at most one of them.
std::optional<std::string> read_secret_pair(YamlReader& reader, const YAML::Node& node, const std::string& path,
                                            const std::string& prefix) {
  const std::string file_key = prefix + "_file";
  const std::string env_key = prefix + "_env";
  if (node[file_key] && node[env_key]) {
    reader.problem(node, path, "give " + file_key + " or " + env_key + ", not both");
    return std::nullopt;
  }
  std::optional<std::string> secret;
  reader.optional(node, path, file_key.c_str(),
                  [&](auto& value, auto key_path) { secret = read_secret(reader, value, key_path, true); });
  reader.optional(node, path, env_key.c_str(),
                  [&](auto& value, auto key_path) { secret = read_secret(reader, value, key_path, false); });
  return secret;
}

// The engine behind a worker and how its cache is modelled (engine,
// cache_model, slots, slot_similarity, cache_ram_mib): for a listed worker,
// and for every worker a DNS name yields.
void read_engine_fields(YamlReader& reader, const YAML::Node& node, const std::string& path, WorkerOptions& out) {
  reader.optional(node, path, "engine", [&](auto& value, auto key_path) {
    std::string engine;
    reader.read(value, key_path, engine);
    bool known = false;
    for (auto kind : {EngineKind::vllm, EngineKind::sglang, EngineKind::llamacpp}) {
      if (engine == to_string(kind)) {
        out.engine = kind;
        known = true;
      }
    }
    out.given.engine = known;
    if (!known && value.IsScalar()) {
      reader.problem(value, key_path, "unknown engine '" + engine + "' (vllm, sglang, llamacpp)");
    }
  });
  reader.optional(node, path, "cache_model", [&](auto& value, auto key_path) {
    std::string model;
    reader.read(value, key_path, model);
    out.given.cache_model = value.IsScalar();
    if (model == to_string(CacheModel::blocks)) {
      out.cache_model = CacheModel::blocks;
    } else if (model == to_string(CacheModel::sequences)) {
      out.cache_model = CacheModel::sequences;
    } else if (value.IsScalar()) {
      reader.problem(value, key_path, "unknown cache_model '" + model + "' (blocks, sequences)");
    }
  });
  if (!out.given.cache_model && out.engine == EngineKind::llamacpp) {
    out.cache_model = CacheModel::sequences;
  }
  reader.optional(node, path, "slots", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.slots, 1, 4096);
    out.given.slots = true;
  });
  reader.optional(node, path, "slot_similarity",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.slot_similarity, 0.0, 1.0); });
  reader.optional(node, path, "cache_ram_mib", [&](auto& value, auto key_path) {
    std::uint32_t mib = 0;
    reader.read(value, key_path, mib, 0, 16'777'216);
    out.cache_ram_mib = mib;
    out.given.cache_ram_mib = true;
  });
  if (out.cache_model == CacheModel::sequences) {
    // Without `slots`, llama-server's /props says how many (until then the
    // worker is indexed as a block cache); another engine cannot say.
    if (out.slots == 0 && out.given.engine && out.engine != EngineKind::llamacpp) {
      reader.problem(node, path + ".slots",
                     "missing: cache_model sequences needs the engine's slot count (only llama-server reports it)");
    }
    if (node["kv_events"]) {
      reader.problem(node["kv_events"], path + ".kv_events",
                     "a worker with KV events is indexed from them: cache_model sequences is for engines without");
    }
  } else if (out.given.cache_model || out.given.engine) {
    for (const char* key : {"slots", "cache_ram_mib"}) {
      if (node[key]) {
        reader.problem(node[key], path + "." + key, "only with cache_model: sequences");
      }
    }
  }
}

void read_worker(YamlReader& reader, const YAML::Node& node, const std::string& path, WorkerOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[].workers[]"))) {
    return;
  }
  read_engine_fields(reader, node, path, out);
  if (auto key = read_secret_pair(reader, node, path, "upstream_api_key")) {
    out.upstream_api_key = std::move(*key);
  }
  if (!node["id"]) {
    reader.problem(node, path + ".id", "missing (every worker needs an id)");
  }
  if (!node["url"]) {
    reader.problem(node, path + ".url", "missing (e.g. http://127.0.0.1:8000)");
  }
  reader.optional(node, path, "id", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.id);
    if (value.IsScalar() && out.id.empty()) {
      reader.problem(value, key_path, "must not be empty");
    }
  });
  reader.optional(node, path, "url", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.url);
    if (!value.IsScalar()) {
      return;
    }
    auto url = parse_upstream_url(out.url);
    if (!url) {
      reader.problem(value, key_path, "invalid URL '" + out.url + "': " + url.error());
    } else {
      out.endpoint = *url;
    }
  });
  reader.optional(node, path, "kv_capacity_blocks", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.kv_capacity_blocks, 1, 1'000'000'000);
  });
  reader.optional(node, path, "role", [&](auto& value, auto key_path) {
    std::string role;
    reader.read(value, key_path, role);
    bool known = false;
    for (auto candidate : {WorkerRole::both, WorkerRole::prefill, WorkerRole::decode}) {
      if (role == to_string(candidate)) {
        out.role = candidate;
        known = true;
      }
    }
    if (!known && value.IsScalar()) {
      reader.problem(value, key_path, "unknown role '" + role + "' (both, prefill, decode)");
    }
  });
  reader.optional(node, path, "bootstrap_port", [&](auto& value, auto key_path) {
    std::uint32_t port = 0;
    reader.read(value, key_path, port, 1, 65'535);
    out.bootstrap_port = static_cast<std::uint16_t>(port);
  });
  reader.optional(node, path, "scrape_interval", [&](auto& value, auto key_path) {
    Milliseconds interval{};
    reader.read_duration(value, key_path, interval, Milliseconds(100));
    out.scrape_interval = interval;
  });
  reader.optional(node, path, "scrape_timeout", [&](auto& value, auto key_path) {
    Milliseconds timeout{};
    reader.read_duration(value, key_path, timeout, Milliseconds(1));
    out.scrape_timeout = timeout;
  });
  for (const char* key : {"kv_events", "kv_events_replay"}) {
    reader.optional(node, path, key, [&](auto& value, auto key_path) {
      std::string& target = std::string_view(key) == "kv_events" ? out.kv_events : out.kv_events_replay;
      reader.read(value, key_path, target);
      const bool listener = std::string_view(key) == "kv_events" && target == "listen";
      if (value.IsScalar() && !listener && !target.starts_with("tcp://") && !target.starts_with("ipc://")) {
        reader.problem(value, key_path,
                       "expected a ZMQ address such as tcp://127.0.0.1:5557, or listen (kv_events.listen)");
      }
    });
  }
}

void read_dns_discovery(YamlReader& reader, const YAML::Node& node, const std::string& path, DnsDiscoveryOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[].workers_from.dns"))) {
    return;
  }
  read_engine_fields(reader, node, path, out.each);
  if (!node["name"]) {
    reader.problem(node, path + ".name", "missing (a DNS name, e.g. vllm-headless.default.svc.cluster.local)");
  }
  if (!node["port"]) {
    reader.problem(node, path + ".port", "missing (the engines' HTTP port, e.g. 8000)");
  }
  reader.optional(node, path, "name", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.name);
    if (value.IsScalar() && out.name.empty()) {
      reader.problem(value, key_path, "must not be empty");
    }
  });
  reader.optional(node, path, "port", [&](auto& value, auto key_path) {
    std::uint32_t port = 0;
    reader.read(value, key_path, port, 1, 65'535);
    out.port = static_cast<std::uint16_t>(port);
  });
  reader.optional(node, path, "interval", [&](auto& value, auto key_path) {
    reader.read_duration(value, key_path, out.interval, Milliseconds(100));
  });
  reader.optional(node, path, "kv_capacity_blocks", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.kv_capacity_blocks, 1, 1'000'000'000);
  });
  reader.optional(node, path, "nameserver", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.nameserver);
    if (auto address = parse_listen_address(out.nameserver); value.IsScalar() && (!address || address->port == 0)) {
      reader.problem(value, key_path, "expected host:port, e.g. 127.0.0.1:53");
    }
  });
  for (const char* key : {"kv_events", "kv_events_replay"}) {
    reader.optional(node, path, key, [&](auto& value, auto key_path) {
      std::string& target = std::string_view(key) == "kv_events" ? out.kv_events : out.kv_events_replay;
      reader.read(value, key_path, target);
      const bool listener = std::string_view(key) == "kv_events" && target == "listen";
      if (value.IsScalar() && !listener &&
          (!target.starts_with("tcp://") || target.find("{host}") == std::string::npos)) {
        reader.problem(value, key_path,
                       "expected a ZMQ address with {host}, such as tcp://{host}:5557, or listen (kv_events.listen)");
      }
    });
  }
}

void read_workers_from(YamlReader& reader, const YAML::Node& node, const std::string& path, WorkersFromOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[].workers_from"))) {
    return;
  }
  reader.optional(node, path, "dns",
                  [&](auto& value, auto key_path) { read_dns_discovery(reader, value, key_path, out.dns.emplace()); });
  reader.optional(node, path, "file", [&](auto& value, auto key_path) {
    auto& file = out.file.emplace();
    reader.read(value, key_path, file.path);
    if (value.IsScalar() && file.path.empty()) {
      reader.problem(value, key_path, "must not be empty (a YAML or JSON file listing workers)");
    }
  });
  if (!out.any()) {
    reader.problem(node, path, "expected dns: or file:");
  }
}

void read_attention(YamlReader& reader, const YAML::Node& node, const std::string& path, ModelOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[].attention"))) {
    return;
  }
  if (node["sliding_window"] && node["chunked_local"]) {
    reader.problem(node, path, "one kind of local attention: sliding_window or chunked_local, not both");
    return;
  }
  reader.optional(node, path, "local_groups",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.attention.groups, 1u, 64u); });
  for (const auto& option : {std::pair{"sliding_window", prefix::AttentionKind::sliding_window},
                             std::pair{"chunked_local", prefix::AttentionKind::chunked_local}}) {
    reader.optional(node, path, option.first, [&](auto& value, auto key_path) {
      out.attention.kind = option.second;
      reader.read(value, key_path, out.attention.tokens, 2u, 1u << 24);
      out.attention_given = true;
    });
  }
}

void read_disaggregation(YamlReader& reader, const YAML::Node& node, const std::string& path,
                         DisaggregationOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[].disaggregation"))) {
    return;
  }
  reader.optional(node, path, "protocol", [&](auto& value, auto key_path) {
    std::string protocol;
    reader.read(value, key_path, protocol);
    if (protocol == "vllm") {
      out.protocol = DisaggregationProtocol::vllm;
    } else if (protocol == "sglang") {
      out.protocol = DisaggregationProtocol::sglang;
    } else if (value.IsScalar()) {
      reader.problem(value, key_path, "unknown protocol '" + protocol + "' (vllm, sglang)");
    }
  });
  reader.optional(node, path, "transfer_gbps",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.transfer_gbps, 1e-3, 1e6); });
  reader.optional(node, path, "local_prefill_tokens", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.local_prefill_tokens, 0u, 1u << 24);
  });
  reader.optional(node, path, "local_prefill_ratio",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.local_prefill_ratio, 0.0, 1.0); });
}

// A disaggregated model needs a protocol, a worker that can prefill and one
// that can decode; roles without `disaggregation` would never be used.
void check_roles(YamlReader& reader, const YAML::Node& node, const std::string& path, const ModelOptions& out) {
  bool prefills = false;
  bool decodes = false;
  bool roles = false;
  for (const auto& worker : out.workers) {
    prefills = prefills || worker.role != WorkerRole::decode;
    decodes = decodes || worker.role != WorkerRole::prefill;
    roles = roles || worker.role != WorkerRole::both;
  }
  if (roles && !out.disaggregation) {
    reader.problem(node, path + ".disaggregation",
                   "missing: workers with role prefill or decode need the model's disaggregation (protocol: vllm or "
                   "sglang)");
  }
  if (out.workers.empty() || out.workers_from.any()) {
    return;  // the discovered workers' roles are known only at run time
  }
  if (!prefills) {
    reader.problem(node["workers"], path + ".workers",
                   "every worker is role: decode, so nothing can prefill: give at least one worker role prefill or "
                   "both");
  }
  if (!decodes) {
    reader.problem(node["workers"], path + ".workers",
                   "every worker is role: prefill, so nothing can decode: give at least one worker role decode or "
                   "both");
  }
}

void read_model(YamlReader& reader, const YAML::Node& node, const std::string& path, ModelOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("models[]"))) {
    return;
  }
  reader.optional(node, path, "cache_isolation", [&](auto& value, auto key_path) {
    std::string mode;
    reader.read(value, key_path, mode);
    if (mode == "tenant") {
      out.cache_isolation = CacheIsolation::tenant;
    } else if (value.IsScalar() && mode != "none") {
      reader.problem(value, key_path, "unknown cache_isolation '" + mode + "' (none, tenant)");
    }
  });
  out.upstream_api_key = read_secret_pair(reader, node, path, "upstream_api_key").value_or("");
  if (!node["name"]) {
    reader.problem(node, path + ".name", "missing (the name clients send as \"model\")");
  }
  reader.optional(node, path, "name", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.name);
    if (value.IsScalar() && out.name.empty()) {
      reader.problem(value, key_path, "must not be empty");
    }
  });
  reader.optional(node, path, "tokenizer",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.tokenizer); });
  reader.optional(node, path, "stand_in_tokenizer", [&](auto& value, auto key_path) {
    std::string kind;
    reader.read(value, key_path, kind);
    if (kind == "llm_d_inference_sim") {
      out.stand_in_tokenizer = prompt::StandInTokenizer::llm_d_inference_sim;
    } else if (value.IsScalar() && kind != "kvgate") {
      reader.problem(value, key_path, "unknown stand_in_tokenizer '" + kind + "' (kvgate, llm_d_inference_sim)");
    }
  });
  reader.optional(node, path, "block_size",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.block_size, 1, 4096); });
  reader.optional(node, path, "adapters", [&](auto& value, auto key_path) {
    if (!reader.check_sequence(value, key_path)) {
      return;
    }
    constexpr std::size_t kMaxAdapters = 256;
    if (value.size() > kMaxAdapters) {
      reader.problem(value, key_path, "at most 256 adapters per model");
      return;
    }
    for (std::size_t index = 0; index < value.size(); ++index) {
      std::string name;
      const auto item_path = indexed(key_path, index);
      reader.read(value[index], item_path, name);
      if (!value[index].IsScalar()) {
        continue;
      }
      if (name.empty()) {
        reader.problem(value[index], item_path, "an adapter name must not be empty");
      } else if (std::find(out.adapters.begin(), out.adapters.end(), name) != out.adapters.end()) {
        reader.problem(value[index], item_path, "duplicate adapter '" + name + "'");
      } else {
        out.adapters.push_back(std::move(name));
      }
    }
  });
  reader.optional(node, path, "discover_adapters",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.discover_adapters); });
  reader.optional(node, path, "max_loras",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.max_loras, 1u, 1024u); });
  reader.optional(node, path, "lora_load", [&](auto& value, auto key_path) {
    reader.read_duration(value, key_path, out.lora_load, Milliseconds(0));
  });
  reader.optional(node, path, "attention",
                  [&](auto& value, auto key_path) { read_attention(reader, value, key_path, out); });
  reader.optional(node, path, "kv_bytes_per_token", [&](auto& value, auto key_path) {
    double bytes = kDefaultKvBytesPerToken;
    reader.read(value, key_path, bytes, 1.0, 1e9);
    out.kv_bytes_per_token = bytes;
  });
  reader.optional(node, path, "offload_gbps",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.offload_gbps, 1e-3, 1e6); });
  reader.optional(node, path, "disaggregation", [&](auto& value, auto key_path) {
    read_disaggregation(reader, value, key_path, out.disaggregation.emplace());
  });
  reader.optional(node, path, "workers_from",
                  [&](auto& value, auto key_path) { read_workers_from(reader, value, key_path, out.workers_from); });
  auto workers = node["workers"];
  if (!workers && node["workers_from"]) {
    return;  // every worker is discovered
  }
  if (!workers || (workers.IsSequence() && workers.size() == 0 && !node["workers_from"])) {
    reader.problem(workers ? workers : node, path + ".workers",
                   "a model needs at least one worker (or workers_from: dns/file)");
    return;
  }
  if (!reader.check_sequence(workers, path + ".workers")) {
    return;
  }
  for (std::size_t index = 0; index < workers.size(); ++index) {
    auto& worker = out.workers.emplace_back();
    read_worker(reader, workers[index], indexed(path + ".workers", index), worker);
    if (worker.upstream_api_key.empty()) {
      worker.upstream_api_key = out.upstream_api_key;
    }
  }
  check_roles(reader, node, path, out);
}

void read_models(YamlReader& reader, const YAML::Node& node, std::vector<ModelOptions>& out) {
  if (!reader.check_sequence(node, "models")) {
    return;
  }
  for (std::size_t index = 0; index < node.size(); ++index) {
    read_model(reader, node[index], indexed("models", index), out.emplace_back());
  }
}

// Names must be unique across the whole file: worker ids label metrics and
// decision records, and model names select the pool.
void check_unique_names(YamlReader& reader, const YAML::Node& root, const Options& options) {
  std::set<std::string> model_names;
  std::set<std::string> worker_ids;
  std::set<std::string> worker_urls;
  for (std::size_t model = 0; model < options.models.size(); ++model) {
    auto model_node = root["models"][model];
    const auto& name = options.models[model].name;
    if (!name.empty() && !model_names.insert(name).second) {
      reader.problem(model_node["name"], indexed("models", model) + ".name", "duplicate model name '" + name + "'");
    }
    // An adapter's name selects it as a model's does: it may name nothing else.
    const auto& adapters = options.models[model].adapters;
    for (std::size_t adapter = 0; adapter < adapters.size(); ++adapter) {
      if (!model_names.insert(adapters[adapter]).second) {
        reader.problem(model_node["adapters"][adapter], indexed(indexed("models", model) + ".adapters", adapter),
                       "adapter '" + adapters[adapter] + "' has the name of another model or adapter");
      }
    }
    const auto& workers = options.models[model].workers;
    for (std::size_t worker = 0; worker < workers.size(); ++worker) {
      auto worker_node = model_node["workers"][worker];
      auto worker_path = indexed(indexed("models", model) + ".workers", worker);
      if (!workers[worker].id.empty() && !worker_ids.insert(workers[worker].id).second) {
        reader.problem(worker_node["id"], worker_path + ".id", "duplicate worker id '" + workers[worker].id + "'");
      }
      if (!workers[worker].url.empty() && !worker_urls.insert(workers[worker].url).second) {
        reader.problem(worker_node["url"], worker_path + ".url",
                       "URL '" + workers[worker].url + "' is used by another worker");
      }
    }
  }
}

bool is_tenant_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

void read_tenant(YamlReader& reader, const YAML::Node& node, const std::string& path, TenantOptions& out) {
  if (!reader.check_mapping(node, path, keys_under("tenants[]"))) {
    return;
  }
  if (!node["name"]) {
    reader.problem(node, path + ".name", "missing (it labels the tenant's metrics and log lines)");
  }
  reader.optional(node, path, "name", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.name);
    if (value.IsScalar() && !is_tenant_name(out.name)) {
      reader.problem(value, key_path, "expected 1-64 letters, digits, '.', '_' or '-'");
    }
  });
  const int sources = (node["api_key_sha256"] ? 1 : 0) + (node["api_key_file"] ? 1 : 0) + (node["api_key_env"] ? 1 : 0);
  if (sources != 1) {
    reader.problem(node, path, "give exactly one of api_key_sha256, api_key_file, api_key_env");
  }
  reader.optional(node, path, "api_key_sha256", [&](auto& value, auto key_path) {
    std::string hex;
    reader.read(value, key_path, hex);
    if (auto digest = crypto::parse_sha256_hex(hex)) {
      out.api_key_sha256 = *digest;
    } else if (value.IsScalar()) {
      reader.problem(value, key_path, "expected 64 hexadecimal digits (sha256sum of the key)");
    }
  });
  if (sources == 1) {
    if (auto key = read_secret_pair(reader, node, path, "api_key")) {
      out.api_key_sha256 = crypto::sha256(*key);
    }
  }
  reader.optional(node, path, "weight",
                  [&](auto& value, auto key_path) { reader.read(value, key_path, out.weight, 0.01, 1000); });
  reader.optional(node, path, "limits", [&](auto& limits, auto limits_path) {
    if (!reader.check_mapping(limits, limits_path, keys_under("tenants[].limits"))) {
      return;
    }
    reader.optional(limits, limits_path, "requests_per_minute", [&](auto& value, auto key_path) {
      reader.read(value, key_path, out.limits.requests_per_minute, 0, 1e9);
    });
    reader.optional(limits, limits_path, "prompt_tokens_per_minute", [&](auto& value, auto key_path) {
      reader.read(value, key_path, out.limits.prompt_tokens_per_minute, 0, 1e12);
    });
  });
}

void read_tenants(YamlReader& reader, const YAML::Node& node, std::vector<TenantOptions>& out) {
  if (!reader.check_sequence(node, "tenants")) {
    return;
  }
  std::set<std::string> names;
  std::vector<std::size_t> readable;
  for (std::size_t index = 0; index < node.size(); ++index) {
    auto path = indexed("tenants", index);
    auto& tenant = out.emplace_back();
    read_tenant(reader, node[index], path, tenant);
    if (!tenant.name.empty() && !names.insert(tenant.name).second) {
      reader.problem(node[index], path + ".name", "duplicate tenant name '" + tenant.name + "'");
    }
    for (std::size_t earlier = 0; earlier + 1 < out.size(); ++earlier) {
      if (crypto::equal_constant_time(out[earlier].api_key_sha256, tenant.api_key_sha256) &&
          tenant.api_key_sha256 != crypto::Sha256{}) {
        reader.problem(node[index], path, "the same API key as tenants[" + std::to_string(earlier) + "]");
      }
    }
  }
}

// The deprecated flat list: each key becomes a tenant of its own.
void read_api_keys(YamlReader& reader, const YAML::Node& node, Options& out) {
  if (!reader.check_sequence(node, "api_keys")) {
    return;
  }
  for (std::size_t index = 0; index < node.size(); ++index) {
    std::string key;
    reader.read(node[index], indexed("api_keys", index), key);
    if (key.empty()) {
      continue;
    }
    TenantOptions tenant;
    tenant.name = "api-key-" + std::to_string(index + 1);
    tenant.api_key_sha256 = crypto::sha256(key);
    out.tenants.push_back(std::move(tenant));
  }
  out.deprecations.push_back(
      "api_keys is deprecated: each key is now a tenant named api-key-N; list them under tenants: with "
      "api_key_sha256, api_key_file or api_key_env");
}

void read_security(YamlReader& reader, const YAML::Node& node, SecurityOptions& out) {
  if (!reader.check_mapping(node, "security", keys_under("security"))) {
    return;
  }
  reader.optional(node, "security", "salt_secret_file", [&](auto& value, auto key_path) {
    reader.read(value, key_path, out.salt_secret_file);
    if (out.salt_secret_file.empty()) {
      return;  // none: no model may isolate tenants
    }
    if (auto secret = read_secret(reader, value, key_path, true)) {
      if (secret->size() < 16) {
        reader.problem(value, key_path, "the secret is shorter than 16 bytes (e.g. head -c 32 /dev/urandom | base64)");
      }
      out.salt_secret = std::move(*secret);
    }
  });
}

void read_admission(YamlReader& reader, const YAML::Node& node, AdmissionOptions& out) {
  if (!reader.check_mapping(node, "admission", keys_under("admission"))) {
    return;
  }
  reader.optional(node, "admission", "max_in_flight",
                  [&](auto& value, auto path) { reader.read(value, path, out.max_in_flight, 0, 10'000'000); });
  reader.optional(node, "admission", "max_in_flight_per_worker", [&](auto& value, auto path) {
    reader.read(value, path, out.max_in_flight_per_worker, 0, 1'000'000);
  });
  reader.optional(node, "admission", "hold_slots",
                  [&](auto& value, auto path) { reader.read(value, path, out.hold_slots); });
  reader.optional(node, "admission", "queue", [&](auto& queue, auto queue_path) {
    if (!reader.check_mapping(queue, queue_path, keys_under("admission.queue"))) {
      return;
    }
    reader.optional(queue, queue_path, "max_length",
                    [&](auto& value, auto path) { reader.read(value, path, out.queue.max_length, 0, 10'000'000); });
    reader.optional(queue, queue_path, "max_wait", [&](auto& value, auto path) {
      reader.read_duration(value, path, out.queue.max_wait, Milliseconds(1));
    });
  });
}

// A worker whose engine publishes to the gateway needs the gateway's socket.
void check_listener(YamlReader& reader, const YAML::Node& root, const Options& options) {
  if (!options.kv_events.listen.empty()) {
    return;
  }
  for (std::size_t model = 0; model < options.models.size(); ++model) {
    const auto& workers = options.models[model].workers;
    for (std::size_t worker = 0; worker < workers.size(); ++worker) {
      if (workers[worker].kv_events == "listen") {
        reader.problem(root["models"][model]["workers"][worker]["kv_events"],
                       indexed(indexed("models", model) + ".workers", worker) + ".kv_events",
                       "listen needs kv_events.listen (the address kvgate binds for engines that dial out)");
      }
    }
    const auto& dns = options.models[model].workers_from.dns;
    if (dns && dns->kv_events == "listen") {
      reader.problem(root["models"][model]["workers_from"]["dns"]["kv_events"],
                     indexed("models", model) + ".workers_from.dns.kv_events",
                     "listen needs kv_events.listen (the address kvgate binds for engines that dial out)");
    }
  }
}

// Isolation needs identities to separate and a secret to key their salts.
void check_isolation(YamlReader& reader, const YAML::Node& root, const Options& options) {
  for (std::size_t model = 0; model < options.models.size(); ++model) {
    if (options.models[model].cache_isolation != CacheIsolation::tenant) {
      continue;
    }
    auto path = indexed("models", model) + ".cache_isolation";
    if (options.tenants.empty()) {
      reader.problem(root["models"][model]["cache_isolation"], path, "tenant isolation needs tenants: (or api_keys)");
    }
    if (options.security.salt_secret.empty()) {
      reader.problem(root["models"][model]["cache_isolation"], path,
                     "tenant isolation needs security.salt_secret_file (the secret that keys each tenant's salt)");
    }
  }
}

void read_root(YamlReader& reader, const YAML::Node& root, Options& out) {
  if (!reader.check_mapping(root, "", keys_under(""))) {
    return;
  }
  reader.optional(root, "", "listen", [&](auto& value, auto path) { read_address(reader, value, path, out.listen); });
  reader.optional(root, "", "admin_listen",
                  [&](auto& value, auto path) { read_address(reader, value, path, out.admin_listen); });
  reader.optional(root, "", "epp_listen", [&](auto& value, auto path) {
    if (value.IsScalar() && value.Scalar().empty()) {
      out.epp_listen.reset();
      return;
    }
    read_address(reader, value, path, out.epp_listen.emplace());
  });
  reader.optional(root, "", "threads", [&](auto& value, auto path) { reader.read(value, path, out.threads, 0, 256); });
  reader.optional(root, "", "log_level", [&](auto& value, auto path) {
    reader.read(value, path, out.log_level);
    static const std::set<std::string> kLevels{"trace", "debug", "info", "warn", "error", "critical", "off"};
    if (value.IsScalar() && !kLevels.contains(out.log_level)) {
      reader.problem(value, path, "unknown log level '" + out.log_level + "' (trace, debug, info, warn, error, off)");
    }
  });
  reader.optional(root, "", "access_log", [&](auto& value, auto path) { reader.read(value, path, out.access_log); });
  reader.optional(root, "", "tenants", [&](auto& value, auto) { read_tenants(reader, value, out.tenants); });
  if (root["api_keys"] && root["tenants"]) {
    reader.problem(root["api_keys"], "api_keys", "give tenants: or the deprecated api_keys:, not both");
  } else {
    reader.optional(root, "", "api_keys", [&](auto& value, auto) { read_api_keys(reader, value, out); });
  }
  reader.optional(root, "", "security", [&](auto& value, auto) { read_security(reader, value, out.security); });
  reader.optional(root, "", "admission", [&](auto& value, auto) { read_admission(reader, value, out.admission); });
  reader.optional(root, "", "limits", [&](auto& value, auto) { read_limits(reader, value, out.limits); });
  reader.optional(root, "", "timeouts", [&](auto& value, auto) { read_timeouts(reader, value, out.timeouts); });
  reader.optional(root, "", "upstream", [&](auto& value, auto) { read_upstream(reader, value, out.upstream); });
  reader.optional(root, "", "health_check",
                  [&](auto& value, auto) { read_health_check(reader, value, out.health_check); });
  reader.optional(root, "", "outlier_detection",
                  [&](auto& value, auto) { read_outlier_detection(reader, value, out.outlier_detection); });
  // The deprecated health_check.passive_failures names the same threshold.
  if (out.health_check.passive_failures && !(root["outlier_detection"] && root["outlier_detection"].IsMap() &&
                                             root["outlier_detection"]["consecutive_failures"])) {
    out.outlier_detection.consecutive_failures = *out.health_check.passive_failures;
  }
  reader.optional(root, "", "metrics_scrape",
                  [&](auto& value, auto) { read_metrics_scrape(reader, value, out.metrics_scrape); });
  reader.optional(root, "", "routing", [&](auto& value, auto) { read_routing(reader, value, out.routing); });
  reader.optional(root, "", "index", [&](auto& value, auto) { read_index(reader, value, out.index); });
  reader.optional(root, "", "kv_events", [&](auto& value, auto) { read_kv_events(reader, value, out.kv_events); });
  reader.optional(root, "", "sessions", [&](auto& value, auto) { read_sessions(reader, value, out.sessions); });
  reader.optional(root, "", "cluster", [&](auto& value, auto) { read_cluster(reader, value, out.cluster.emplace()); });
  reader.optional(root, "", "decision_log",
                  [&](auto& value, auto path) { reader.read(value, path, out.decision_log); });
  if (auto models = root["models"]; models) {
    read_models(reader, models, out.models);
    check_unique_names(reader, root, out);
    check_isolation(reader, root, out);
    check_listener(reader, root, out);
  } else {
    reader.problem(root, "models", "missing: configure at least one model with its workers");
  }
}

}  // namespace

std::string Problem::to_string() const {
  std::ostringstream text;
  text << file;
  if (line > 0) {
    text << ':' << line;
  }
  text << ": ";
  if (!path.empty()) {
    text << path << ": ";
  }
  text << message;
  return text.str();
}

LoadResult load_text(const std::string& text, const std::string& file_name) {
  std::vector<Problem> problems;
  YamlReader reader(file_name, problems);
  Options options;
  try {
    auto root = YAML::Load(text);
    if (!root || root.IsNull()) {
      reader.problem_at_line(0, "", "the file is empty");
    } else {
      read_root(reader, root, options);
    }
  } catch (const YAML::Exception& error) {
    reader.problem_at_line(error.mark.line + 1, "", "YAML syntax error: " + error.msg);
  }
  if (!problems.empty()) {
    return unexpected(std::move(problems));
  }
  return options;
}

WorkerListResult load_worker_list(const std::string& text, const std::string& file_name) {
  std::vector<Problem> problems;
  YamlReader reader(file_name, problems);
  std::vector<WorkerOptions> workers;
  try {
    auto root = YAML::Load(text);
    std::string path = "workers";
    if (root && root.IsMap()) {
      if (!reader.check_mapping(root, "", {"workers"})) {
        return unexpected(std::move(problems));
      }
      root = root["workers"];
    }
    if (root && !root.IsNull() && reader.check_sequence(root, path)) {
      std::set<std::string> ids;
      std::set<std::string> urls;
      for (std::size_t index = 0; index < root.size(); ++index) {
        auto& worker = workers.emplace_back();
        read_worker(reader, root[index], indexed(path, index), worker);
        if (!worker.id.empty() && !ids.insert(worker.id).second) {
          reader.problem(root[index], indexed(path, index) + ".id", "duplicate worker id '" + worker.id + "'");
        }
        if (!worker.url.empty() && !urls.insert(worker.url).second) {
          reader.problem(root[index], indexed(path, index) + ".url",
                         "URL '" + worker.url + "' is used by another worker");
        }
      }
    }
  } catch (const YAML::Exception& error) {
    reader.problem_at_line(error.mark.line + 1, "", "YAML syntax error: " + error.msg);
  }
  if (!problems.empty()) {
    return unexpected(std::move(problems));
  }
  return workers;
}

LoadResult load_file(const std::string& path) {
  auto contents = read_whole_file(path);
  if (!contents) {
    return unexpected(std::vector<Problem>{Problem{path, 0, "", contents.error().message}});
  }
  return load_text(*contents, path);
}

std::string_view to_string(PolicyKind policy) {
  switch (policy) {
    case PolicyKind::round_robin:
      return "round_robin";
    case PolicyKind::least_load:
      return "least_load";
    case PolicyKind::session_hash:
      return "session_hash";
    case PolicyKind::prefix_hash:
      return "prefix_hash";
    case PolicyKind::cache_aware:
      return "cache_aware";
    case PolicyKind::dynamo_cost:
      return "dynamo_cost";
    case PolicyKind::sglang_cache_aware:
      return "sglang_cache_aware";
  }
  return "unknown";
}

}  // namespace kvgate::config
