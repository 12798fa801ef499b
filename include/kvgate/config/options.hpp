#pragma once
// Typed configuration. Every field carries the default that
// config/kvgate.example.yaml documents; the loader only overrides what the
// file says. No YAML type leaves the config module.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/core/address.hpp"
#include "kvgate/core/units.hpp"
#include "kvgate/crypto/digest.hpp"
#include "kvgate/prefix/attention.hpp"
#include "kvgate/prompt/stand_in_tokenizer.hpp"

namespace kvgate::config {

enum class PolicyKind {
  round_robin,
  least_load,
  session_hash,
  prefix_hash,
  cache_aware,
  dynamo_cost,
  sglang_cache_aware
};
inline constexpr PolicyKind kPolicyKinds[] = {
    PolicyKind::cache_aware, PolicyKind::session_hash, PolicyKind::prefix_hash,       PolicyKind::least_load,
    PolicyKind::round_robin, PolicyKind::dynamo_cost,  PolicyKind::sglang_cache_aware};

// The engine behind a worker: which defaults suit it (llama.cpp keeps whole
// prompts in slots). Metric names and hit fields of all three are read
// whatever this says.
enum class EngineKind : std::uint8_t { vllm, sglang, llamacpp };

// How the index models a worker's cache when no KV events describe it.
// blocks: an LRU of the blocks routed there, bounded by its KV capacity
// (vLLM, SGLang). sequences: `slots` whole prompts, each slot keeping the
// last sequence it ran, chosen as llama-server chooses
// (kv_events/sequence_slots.hpp).
enum class CacheModel : std::uint8_t { blocks, sequences };

// What a worker does in a disaggregated fleet (vLLM's KV connectors, SGLang's
// PD mode): prefill only (answers one token and hands the prompt's KV on),
// decode only (receives the KV, or prefills a short uncached part itself),
// or both (an aggregated engine: every worker of a model without roles).
enum class WorkerRole : std::uint8_t { both, prefill, decode };

// How the two phases of a disaggregated request reach the engines.
// vllm: the prefill worker first (max_tokens 1, kv_transfer_params asking
// for remote decode), then the decoder with the prefill answer's
// kv_transfer_params. sglang: both at once, with the prefill worker's
// bootstrap host, port and room in the body.
enum class DisaggregationProtocol : std::uint8_t { vllm, sglang };

// Which of a worker's engine keys the configuration set. The others follow
// what the engine says of itself (workers/engine_identity.hpp): its kind
// from its /metrics names, llama-server's slots from /props.
struct EngineKeysGiven {
  bool engine = false;
  bool cache_model = false;
  bool slots = false;
  bool cache_ram_mib = false;
  bool operator==(const EngineKeysGiven&) const = default;
};

// llama-server's own default --cache-ram (MiB): what a llama.cpp worker is
// assumed to keep unless the configuration or its answers say otherwise.
inline constexpr std::uint64_t kLlamacppDefaultCacheRamMib = 8192;

struct WorkerOptions {
  std::string id;
  std::string url;
  HttpUrl endpoint;
  std::string kv_events;                 // ZMQ publisher address, empty when absent
  std::string kv_events_replay;          // ZMQ replay (ROUTER) address, empty when absent
  std::uint32_t kv_capacity_blocks = 0;  // engine's GPU KV blocks; 0: index.default_kv_capacity_blocks
  // This worker's /metrics schedule; unset: metrics_scrape's. An engine
  // that serves /metrics behind inference (llama.cpp) wants a longer one.
  std::optional<Milliseconds> scrape_interval;
  std::optional<Milliseconds> scrape_timeout;
  // The key this worker's engine checks (vLLM's --api-key), read from
  // api_key_file or api_key_env at load; empty: none. Sent as
  // "Authorization: Bearer" in place of the client's, which never reaches a
  // worker when kvgate authenticates. Never logged or shown.
  std::string upstream_api_key;
  EngineKind engine = EngineKind::vllm;
  CacheModel cache_model = CacheModel::blocks;  // sequences by default for llamacpp
  std::uint32_t slots = 0;                      // sequences: llama-server's -np
  // sequences: llama-server's --slot-prompt-similarity (0.1 since late
  // 2025, 0.5 before; 0 turns the similarity rule off).
  double slot_similarity = 0.1;
  // sequences: llama-server's host-RAM prompt cache (--cache-ram, MiB; its
  // default is 8192): slots' sequences saved there are credited as a lower
  // tier, priced by their load time. 0: none (--cache-ram 0).
  std::uint64_t cache_ram_mib = 0;
  WorkerRole role = WorkerRole::both;
  // SGLang's --disaggregation-bootstrap-port on a prefill worker (its
  // default): where decoders fetch the KV of a bootstrap room.
  std::uint16_t bootstrap_port = 8998;
  EngineKeysGiven given;
  bool operator==(const WorkerOptions&) const = default;
};

// Workers found in DNS: every address of `name` (A and AAAA records, e.g. a
// Kubernetes headless Service) is a worker with id "host:port", re-resolved
// every `interval`. `{host}` in the event endpoints is the address.
struct DnsDiscoveryOptions {
  std::string name;
  std::uint16_t port = 0;
  Milliseconds interval{10'000};
  std::string kv_events;         // e.g. "tcp://{host}:5557"; empty: no events
  std::string kv_events_replay;  // e.g. "tcp://{host}:5558"
  // "host:port" of the DNS server to ask; empty: the system's (resolv.conf,
  // with its search domains), which is what a pod wants.
  std::string nameserver;
  std::uint32_t kv_capacity_blocks = 0;
  // What every discovered worker runs, as in a listed worker: engine,
  // cache_model, slots, slot_similarity, cache_ram_mib (the other fields
  // of `each` are unused: they come from the address and the fields above).
  WorkerOptions each;
  bool operator==(const DnsDiscoveryOptions&) const = default;
};

// Workers listed in a YAML or JSON file (entries as in `workers`), re-read
// when the file changes (polled every second: a Kubernetes ConfigMap is
// replaced through a symlink, which file watches miss).
struct FileDiscoveryOptions {
  std::string path;
  bool operator==(const FileDiscoveryOptions&) const = default;
};

struct WorkersFromOptions {
  std::optional<DnsDiscoveryOptions> dns;
  std::optional<FileDiscoveryOptions> file;
  [[nodiscard]] bool any() const { return dns.has_value() || file.has_value(); }
  bool operator==(const WorkersFromOptions&) const = default;
};

// Whether tenants share the engines' prefix cache (cache_isolation).
// `tenant`: each tenant's requests carry a cache_salt keyed by the
// operator's secret, so the engines never reuse one tenant's blocks for
// another (the prefix-cache timing side channel) and the index, keyed by the
// same salt, never credits one tenant with another's blocks.
enum class CacheIsolation { none, tenant };

// A model whose workers have roles (prefill, decode): how the phases reach
// the engines and when a decoder prefills for itself.
struct DisaggregationOptions {
  DisaggregationProtocol protocol = DisaggregationProtocol::vllm;
  // The link between the pools in GB/s (NIXL over RDMA: a 200 Gb/s NIC is
  // ~25 GB/s); the prior until observed transfers teach the real figure.
  double transfer_gbps = 25;
  // The decoder prefills itself when what it lacks of the prompt is at most
  // this many tokens (llm-d's prefix-based decider, Dynamo's conditional
  // disaggregation), or when it holds at least this share of it (1: never
  // by share: a share lets long remainders stall the decoder's streams;
  // BENCHMARKS.md compares both).
  std::uint32_t local_prefill_tokens = 512;
  double local_prefill_ratio = 1;
  bool operator==(const DisaggregationOptions&) const = default;
};

// Llama-3-8B in BF16: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes.
inline constexpr double kDefaultKvBytesPerToken = 131'072;

struct ModelOptions {
  std::string name;
  std::string tokenizer;  // empty: the stand-in tokenisation (stand_in_tokenizer)
  std::uint32_t block_size = 16;
  // The configured workers; with workers_from, the discovered ones are
  // added to these at run time (a static entry wins over a discovered one
  // with the same id).
  std::vector<WorkerOptions> workers;
  WorkersFromOptions workers_from;
  // Every worker's upstream_api_key unless it has its own (discovered
  // workers included).
  std::string upstream_api_key;
  CacheIsolation cache_isolation = CacheIsolation::none;
  // LoRA adapters the model's workers serve, by the name a request sends as
  // "model" (vLLM's --lora-modules NAME=PATH). Each is its own cache
  // partition on the base model's workers.
  std::vector<std::string> adapters;
  // How many adapters a worker holds at once (vLLM --max-loras, default 1)
  // when its engine does not report it (vllm:lora_requests_info), and what
  // loading one costs before the prefill can start.
  std::uint32_t max_loras = 1;
  Milliseconds lora_load{100};
  // Also serve the adapters the workers' engines list on this model (GET
  // /v1/models, "parent": this model), as they are loaded and unloaded.
  bool discover_adapters = false;
  // Local-attention layers beside the full-attention ones (Gemma 3's
  // sliding window, Llama 4's chunks), whose cache group a hit also needs.
  // The engines' KV events say so themselves (kv_cache_spec_kind): what they
  // report wins, and a configured value that contradicts it is named as the
  // cause when the worker's predictions drift.
  prefix::LocalAttention attention;
  bool attention_given = false;
  // A prefix held only in a lower tier (CPU, disk: vLLM's offloading
  // connector, LMCache) is loaded, not computed: priced at one token's KV
  // bytes over the tier's bandwidth (and a disaggregated model's KV moved
  // over its link at the same bytes). Unset: from the tokenizer folder's
  // config.json (prompt/kv_shape.hpp), else kDefaultKvBytesPerToken.
  // offload_gbps: PCIe 4.0 x16 (~25 GB/s effective).
  std::optional<double> kv_bytes_per_token;
  double offload_gbps = 25;
  // A model whose workers have roles (prefill, decode).
  std::optional<DisaggregationOptions> disaggregation;
  // Without a tokenizer folder: whose stand-in tokens the engines compute.
  prompt::StandInTokenizer stand_in_tokenizer = prompt::StandInTokenizer::kvgate;
  bool operator==(const ModelOptions&) const = default;
};

struct LimitOptions {
  std::uint64_t max_body_bytes = 16ull * 1024 * 1024;
  std::uint32_t max_header_bytes = 64 * 1024;
  std::uint32_t max_header_fields = 100;  // header lines per request; more is 431
  std::uint32_t max_connections = 10'000;
  bool operator==(const LimitOptions&) const = default;
};

struct TimeoutOptions {
  Milliseconds header_read{10'000};      // client: request line + headers
  Milliseconds body_read{60'000};        // client: whole request body
  Milliseconds keep_alive_idle{60'000};  // client: between requests
  Milliseconds client_write{60'000};     // client: one write of a response (slow readers)
  Milliseconds upstream_connect{2'000};
  Milliseconds upstream_response{300'000};  // until the response header (queue + prefill)
  Milliseconds upstream_idle{120'000};      // between two reads of a response body
  Milliseconds prefill_response{120'000};   // a disaggregated request's prefill worker: its whole answer
  Milliseconds shutdown_grace{30'000};
  bool operator==(const TimeoutOptions&) const = default;
};

// Retries draw from a budget so that a failing fleet is not hit by a retry
// storm: beyond a small floor, at most `ratio` of the requests of the last
// 10 s may be retried (counted per I/O thread).
struct RetryBudgetOptions {
  double ratio = 0.2;
  double min_retries_per_second = 3;
  bool operator==(const RetryBudgetOptions&) const = default;
};

struct UpstreamOptions {
  std::uint32_t retries = 1;  // extra attempts on another worker
  RetryBudgetOptions retry_budget;
  std::uint32_t max_idle_connections = 64;       // per worker and per I/O thread
  Milliseconds idle_connection_timeout{30'000};  // pooled connections older than this are closed
  bool operator==(const UpstreamOptions&) const = default;
};

struct HealthCheckOptions {
  bool enabled = true;
  std::string path = "/health";
  Milliseconds interval{2'000};
  Milliseconds timeout{1'000};
  std::uint32_t unhealthy_threshold = 3;  // consecutive failed checks to mark down
  std::uint32_t healthy_threshold = 2;    // consecutive good checks to mark up again
  // Deprecated: outlier_detection.consecutive_failures, which it sets when
  // that is not given.
  std::optional<std::uint32_t> passive_failures;
  bool operator==(const HealthCheckOptions&) const = default;
};

// Passive outlier ejection (workers/outlier_ejection.hpp): consecutive
// traffic failures take a worker out of routing for an ejection time that
// doubles while it keeps failing; never more than max_ejected_percent of a
// model's workers at once.
struct OutlierDetectionOptions {
  std::uint32_t consecutive_failures = 5;  // 0: off
  Milliseconds base_ejection_time{5'000};
  Milliseconds max_ejection_time{300'000};
  std::uint32_t max_ejected_percent = 50;
  bool operator==(const OutlierDetectionOptions&) const = default;
};

// How cache_aware prices a worker's prefill (policy/prefill_fit.hpp):
// relative: the configured priors times the worker's learned speed over
// the model's median speed (the priors' shape and level, the workers'
// measured differences); pooled: the model's pooled fit times the worker's
// speed; per_worker: the worker's own five coefficients.
enum class PrefillFitScope : std::uint8_t { relative, pooled, per_worker };

// cache_aware's cost model (policy.hpp CostModel explains the defaults).
struct CacheAwareOptions {
  // Priors of every worker's prefill cost (policy/prefill_rates.hpp), which
  // it then learns from its own requests when learn_prefill_cost is on.
  double prefill_ms_per_token = 0.027;
  double prefill_ms_per_token_pair = 1.31e-6;
  double prefill_base_ms = 6;
  double prefill_ms_per_active_token = 4e-5;
  bool learn_prefill_cost = true;
  PrefillFitScope prefill_fit = PrefillFitScope::relative;
  std::optional<double> own_prefill_weight;  // empty: the fleet's price of work (policy/work_price.hpp)
  bool eviction_term = true;                 // policy/eviction.hpp
  bool move_margin = false;                  // policy/cache_aware.cpp, keep_within_margin
  bool congestion_cost = false;              // policy/congestion.hpp
  std::optional<Milliseconds> soft_margin;   // empty: no load bound at all
  double load_bound_epsilon = 0.25;
  double queue_ms_per_request = 0.5;
  double queue_ms_per_waiting_request = 5;
  // Engine snapshots (scraped /metrics) older than this are ignored.
  Milliseconds engine_metrics_max_age{5'000};
  bool operator==(const CacheAwareOptions&) const = default;
};

// The router's check of its cache predictions against the engines' usage
// (workers/prediction_drift.hpp explains the rule).
struct DriftOptions {
  bool enabled = true;
  std::uint32_t window = 32;
  std::uint32_t min_samples = 8;
  // Under KV pressure a fair share of honest predictions run over the
  // engine's figure (an eviction the events have not told yet); a lower
  // trip share marks healthy workers drifting on the WEKA replay. A
  // misconfigured tokenizer or block size is over on nearly every
  // prediction.
  double trip_share = 0.8;
  double recover_share = 0.5;
  bool operator==(const DriftOptions&) const = default;
};

// Scraping each worker's Prometheus /metrics (engine load, KV capacity).
struct MetricsScrapeOptions {
  bool enabled = true;
  std::string path = "/metrics";
  Milliseconds interval{1'000};
  Milliseconds timeout{1'000};
  // After failed scrapes a worker's next one waits twice as long each time,
  // up to this (workers/scrape_schedule.hpp).
  Milliseconds max_backoff{30'000};
  bool operator==(const MetricsScrapeOptions&) const = default;
};

struct RoutingOptions {
  PolicyKind policy = PolicyKind::cache_aware;
  CacheAwareOptions cache_aware;
  // prefix_hash: how many leading blocks form the affinity key.
  std::uint32_t prefix_hash_blocks = 4;
  // The peers' algorithms (policy/README.md): their own defaults.
  double dynamo_overlap_weight = 1.0;
  double sglang_cache_threshold = 0.3;
  std::uint32_t sglang_balance_abs_threshold = 64;
  double sglang_balance_rel_threshold = 1.5;
  // Every response carries x-kvgate-route (else only when the request asks
  // with x-kvgate-explain: 1).
  bool receipt = false;
  DriftOptions drift;
  bool operator==(const RoutingOptions&) const = default;
};

// Where a request's session key comes from (sessions.key_from): a header
// or a top-level body field; the first source present and non-empty wins.
enum class SessionKeyPlace : std::uint8_t { header, body };

struct SessionKeySource {
  SessionKeyPlace place = SessionKeyPlace::header;
  std::string name;   // a header name in lower case, or a body field
  std::string label;  // "header:NAME" or "body:NAME": as configured, as logged
  bool operator==(const SessionKeySource&) const = default;
};

// The list is bounded so that the shell gathers header values into a
// fixed array (no allocation per request).
inline constexpr std::size_t kMaxSessionKeySources = 16;

inline SessionKeySource session_key_source(SessionKeyPlace place, std::string_view name) {
  const std::string_view prefix = place == SessionKeyPlace::header ? "header:" : "body:";
  return {place, std::string(name), std::string(prefix) + std::string(name)};
}

// kvgate's own header, the agent clients' session headers (Claude Code,
// OpenAI Codex in both spellings, OpenCode), then OpenAI's body fields.
inline std::vector<SessionKeySource> default_session_key_sources() {
  using enum SessionKeyPlace;
  return {session_key_source(header, "x-session-id"),
          session_key_source(header, "x-claude-code-session-id"),
          session_key_source(header, "session-id"),
          session_key_source(header, "session_id"),
          session_key_source(header, "x-session-affinity"),
          session_key_source(body, "prompt_cache_key"),
          session_key_source(body, "user")};
}

// The session table (route/README.md): one entry per session key.
struct SessionOptions {
  std::uint32_t max_sessions = 65'536;  // LRU beyond
  Milliseconds idle_ttl{1'800'000};     // a key idle longer starts a new session (session_expired)
  std::uint32_t turns_kept = 8;         // the last turns kept per session for /debug/sessions
  std::vector<SessionKeySource> key_from = default_session_key_sources();
  bool operator==(const SessionOptions&) const = default;
};

struct IndexOptions {
  std::uint32_t max_entries = 10'000'000;  // (block, worker) pairs per model; LRU beyond
  // Routing-time inserts for workers whose events are on: they bridge the
  // time until the engine's BlockStored arrives.
  Milliseconds speculative_ttl{2'000};
  // Routing-time inserts for workers without events (or with a broken
  // stream): how long the gateway assumes the engine keeps a prefix.
  Milliseconds approximate_ttl{600'000};
  std::uint32_t default_kv_capacity_blocks = 65'536;  // when a worker's capacity is unknown
  bool operator==(const IndexOptions&) const = default;
};

struct KvEventOptions {
  Milliseconds replay_timeout{1'000};  // a replay that has not ended by then failed
  // A SUB socket kvgate binds for engines that dial out (llm-d's simulator,
  // vLLM with a connecting publisher): workers with kv_events "listen"
  // are told apart by the messages' topic, kv@<host:port or host>@<model>.
  std::string listen;
  // A worker with events configured that got traffic but sent no event for
  // this long is flagged as silent.
  Milliseconds silence_after{10'000};
  bool operator==(const KvEventOptions&) const = default;
};

// Several kvgate replicas sharing session and routing state (cluster/):
// session turns, routing-time inserts and in-flight counts go through a
// Redis stream every replica reads. Absent: this kvgate runs alone.
struct ClusterOptions {
  std::string engine = "redis";                // the only engine: docs/design.md says why
  HostPort url{"127.0.0.1", 6379};             // written redis://host:port
  std::string replica_id;                      // empty: <hostname>-<pid>
  std::string stream = "kvgate";               // the Redis key; replicas naming the same key form one cluster
  std::uint32_t max_stream_entries = 100'000;  // the stream is trimmed to about this many entries
  Milliseconds catch_up{600'000};              // a starting replica applies what the stream holds from this far back
  Milliseconds load_interval{50};              // how often in-flight counts are published (when they changed)
  Milliseconds peer_timeout{3'000};            // a peer silent this long: its in-flight counts no longer count
  std::uint32_t queue = 4'096;  // messages waiting to be published; beyond, new ones are dropped (counted)
  bool operator==(const ClusterOptions&) const = default;
};

// Per-tenant budgets; 0 is unlimited.
struct TenantLimitOptions {
  double requests_per_minute = 0;
  double prompt_tokens_per_minute = 0;  // counted with the model's own tokenisation
  bool operator==(const TenantLimitOptions&) const = default;
};

// A client identity: the SHA-256 of its API key (given as a digest, or read
// from a file or an environment variable at load, then only the digest is
// kept), its share of the fair queue and its limits.
struct TenantOptions {
  std::string name;
  crypto::Sha256 api_key_sha256{};
  double weight = 1;
  TenantLimitOptions limits;
  bool operator==(const TenantOptions&) const = default;
};

// Admission control (proxy/admission_gate.hpp): beyond the in-flight
// limits (0: none) a request waits in a queue served fairly across tenants
// (weighted deficit round robin), or is refused with 429 and Retry-After
// when the queue is full or its wait would pass max_wait.
struct AdmissionQueueOptions {
  std::uint32_t max_length = 1024;
  Milliseconds max_wait{5'000};
  bool operator==(const AdmissionQueueOptions&) const = default;
};

struct AdmissionOptions {
  std::uint32_t max_in_flight = 0;             // inference requests through the gateway
  std::uint32_t max_in_flight_per_worker = 0;  // a worker at it takes no new request
  // A slot engine takes at most its slots, and keeps a freed one for its
  // conversation's next turn while that pays (policy/slot_hold.hpp).
  bool hold_slots = false;
  AdmissionQueueOptions queue;
  [[nodiscard]] bool limits_concurrency() const {
    return max_in_flight > 0 || max_in_flight_per_worker > 0 || hold_slots;
  }
  bool operator==(const AdmissionOptions&) const = default;
};

struct SecurityOptions {
  std::string salt_secret_file;
  // The file's contents, read at load: keys every tenant's cache_salt.
  // Never logged or shown.
  std::string salt_secret;
  bool operator==(const SecurityOptions&) const = default;
};

struct Options {
  HostPort listen{"127.0.0.1", 8080};
  HostPort admin_listen{"127.0.0.1", 9090};
  // The endpoint picker's gRPC listener (Envoy's external processing
  // protocol, src/picker); nullopt: no picker.
  std::optional<HostPort> epp_listen;
  std::uint32_t threads = 0;  // 0: one per CPU the process may use (app/cpus.hpp)
  std::string log_level = "info";
  bool access_log = true;
  // Empty: no authentication (every request is the anonymous tenant).
  // The deprecated top-level `api_keys` list becomes one tenant per key.
  std::vector<TenantOptions> tenants;
  SecurityOptions security;
  AdmissionOptions admission;
  LimitOptions limits;
  TimeoutOptions timeouts;
  UpstreamOptions upstream;
  HealthCheckOptions health_check;
  OutlierDetectionOptions outlier_detection;
  MetricsScrapeOptions metrics_scrape;
  std::vector<ModelOptions> models;
  RoutingOptions routing;
  IndexOptions index;
  KvEventOptions kv_events;
  SessionOptions sessions;
  std::optional<ClusterOptions> cluster;  // nullopt: this kvgate runs alone
  std::string decision_log;               // empty: off
  // Deprecated settings the file used, one sentence each (logged at start,
  // printed by check-config).
  std::vector<std::string> deprecations;
  bool operator==(const Options&) const = default;
};

std::string_view to_string(PolicyKind policy);
inline constexpr std::string_view to_string(EngineKind engine) {
  switch (engine) {
    case EngineKind::vllm:
      return "vllm";
    case EngineKind::sglang:
      return "sglang";
    case EngineKind::llamacpp:
      return "llamacpp";
  }
  return "unknown";
}
inline constexpr std::string_view to_string(CacheModel model) {
  return model == CacheModel::sequences ? "sequences" : "blocks";
}
inline constexpr std::string_view to_string(WorkerRole role) {
  switch (role) {
    case WorkerRole::both:
      return "both";
    case WorkerRole::prefill:
      return "prefill";
    case WorkerRole::decode:
      return "decode";
  }
  return "both";
}
inline constexpr std::string_view to_string(DisaggregationProtocol protocol) {
  return protocol == DisaggregationProtocol::sglang ? "sglang" : "vllm";
}

}  // namespace kvgate::config
