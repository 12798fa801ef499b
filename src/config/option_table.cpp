#include "kvgate/config/option_table.hpp"

#include <array>

namespace kvgate::config {

using enum OptionKind;

std::string_view to_string(OptionKind kind) {
  switch (kind) {
    case section:
      return "mapping";
    case list:
      return "list";
    case boolean:
      return "boolean";
    case integer:
      return "integer";
    case number:
      return "number";
    case duration:
      return "duration";
    case byte_size:
      return "size";
    case text:
      return "string";
    case address:
      return "host:port";
    case choice:
      return "choice";
  }
  return "string";
}

namespace {

// In the order of config/kvgate.example.yaml. A section's own entry comes
// before its keys.
constexpr std::array kOptions{
    OptionSpec{"listen", address, "127.0.0.1:8080", "the OpenAI-compatible API (data plane); restart to change"},
    OptionSpec{"admin_listen", address, "127.0.0.1:9090",
               "/metrics, /healthz, /readyz, /debug/*, the status page; restart to change"},
    OptionSpec{"epp_listen", address, "",
               "the endpoint picker (gRPC ext_proc, Gateway API Inference Extension); empty: off; restart to "
               "change"},
    OptionSpec{"threads", integer, "0",
               "I/O threads, 0 to 256; 0: one per CPU this process may use (affinity, cgroup CPU limit); restart "
               "to change"},
    OptionSpec{"log_level", choice, "info", "trace, debug, info, warn, error, critical, off"},
    OptionSpec{"access_log", boolean, "true", "one line per request on stderr (never prompt text)"},
    OptionSpec{"decision_log", text, "", "a path: JSON lines, one per routed request; reopened on SIGHUP"},
    OptionSpec{"api_keys", list, "",
               "deprecated: a list of keys, each becoming a tenant named api-key-N; use tenants instead"},
    OptionSpec{"tenants", list, "",
               "when listed, /v1/* needs the Bearer key of one of them (401 otherwise); empty: every request is "
               "the anonymous tenant"},
    OptionSpec{"tenants[].name", text, "", "letters, digits, . _ -; labels logs, metrics and decision records"},
    OptionSpec{"tenants[].api_key_sha256", text, "", "the key's SHA-256 in hex (`printf %s KEY | sha256sum`)"},
    OptionSpec{"tenants[].api_key_file", text, "", "or: a file holding the key (trailing newline ignored)"},
    OptionSpec{"tenants[].api_key_env", text, "", "or: an environment variable holding the key"},
    OptionSpec{"tenants[].weight", number, "1", "share of the admission queue, 0.01 to 1000"},
    OptionSpec{"tenants[].limits", section, "", "per-minute budgets, answered 429 rate_limit_exceeded beyond"},
    OptionSpec{"tenants[].limits.requests_per_minute", number, "0", "requests a minute; 0: unlimited"},
    OptionSpec{"tenants[].limits.prompt_tokens_per_minute", number, "0",
               "prompt tokens a minute, counted with the model's own tokenisation; 0: unlimited"},
    OptionSpec{"admission", section, "", "in-flight limits and the fair queue beyond them (0: no limit)"},
    OptionSpec{"admission.max_in_flight", integer, "0", "inference requests through this gateway"},
    OptionSpec{"admission.max_in_flight_per_worker", integer, "0",
               "a worker at it takes nothing new (kept by the router)"},
    OptionSpec{"admission.hold_slots", boolean, "false",
               "slot engines without a RAM prompt cache take at most their slots, more wait in the queue, and a "
               "freed slot is kept for its conversation's next turn while the turn is expected back sooner than "
               "its history would take to compute again"},
    OptionSpec{"admission.queue", section, "", "where requests wait beyond the limits, served fairly across tenants"},
    OptionSpec{"admission.queue.max_length", integer, "1024", "waiting requests; more get 429 queue_full"},
    OptionSpec{"admission.queue.max_wait", duration, "5s", "a request waiting longer gets 429 queue_timeout"},
    OptionSpec{"security", section, "", "secrets kvgate reads at load"},
    OptionSpec{"security.salt_secret_file", text, "",
               "a file of at least 16 bytes that keys each tenant's cache_salt (needed by cache_isolation: "
               "tenant)"},
    OptionSpec{"limits", section, "", "what a client may send"},
    OptionSpec{"limits.max_body_size", byte_size, "16MiB", "larger request bodies get 413"},
    OptionSpec{"limits.max_header_size", byte_size, "64KiB", "larger request headers get 431 (headers_too_large)"},
    OptionSpec{"limits.max_header_fields", integer, "100", "more header lines get 431 (too_many_headers)"},
    OptionSpec{"limits.max_connections", integer, "10000", "client connections; more are closed at accept"},
    OptionSpec{"timeouts", section, "", "a deadline for every phase of an exchange"},
    OptionSpec{"timeouts.header_read", duration, "10s", "first request line and headers of a new connection"},
    OptionSpec{"timeouts.body_read", duration, "60s", "a whole request body"},
    OptionSpec{"timeouts.keep_alive_idle", duration, "60s",
               "an idle keep-alive connection waits this long for its next request"},
    OptionSpec{"timeouts.client_write", duration, "60s", "one write to a client (slow readers are cut off)"},
    OptionSpec{"timeouts.upstream_connect", duration, "2s", "TCP connect to a worker"},
    OptionSpec{"timeouts.upstream_response", duration, "5m",
               "until the worker's response header (queueing and prefill); then 504"},
    OptionSpec{"timeouts.prefill_response", duration, "2m",
               "a disaggregated request's prefill worker, until its whole answer; then the prefill is retried on "
               "another prefill worker or the decoder"},
    OptionSpec{"timeouts.upstream_idle", duration, "2m",
               "longest silence inside a response body (between stream events)"},
    OptionSpec{"timeouts.shutdown_grace", duration, "30s", "SIGTERM: how long in-flight requests may finish"},
    OptionSpec{"upstream", section, "", "retries and the connections to the workers"},
    OptionSpec{"upstream.retries", integer, "1",
               "extra attempts on another worker, only before any response byte (0 to 10)"},
    OptionSpec{"upstream.retry_budget", section, "",
               "no retry storm when the fleet fails: retries beyond a floor are a share of recent requests"},
    OptionSpec{"upstream.retry_budget.ratio", number, "0.2",
               "retries beyond the floor: at most this share of the last 10 s of requests (per I/O thread)"},
    OptionSpec{"upstream.retry_budget.min_retries_per_second", number, "3", "the floor, always allowed"},
    OptionSpec{"upstream.max_idle_connections", integer, "64",
               "pooled keep-alive connections per worker and per I/O thread"},
    OptionSpec{"upstream.idle_connection_timeout", duration, "30s",
               "pooled connections idle longer than this are not reused"},
    OptionSpec{"health_check", section, "", "active checks of every worker"},
    OptionSpec{"health_check.enabled", boolean, "true", "false: workers are taken as healthy"},
    OptionSpec{"health_check.path", text, "/health", "vLLM and SGLang both serve GET /health"},
    OptionSpec{"health_check.interval", duration, "2s", "between two checks of a worker"},
    OptionSpec{"health_check.timeout", duration, "1s", "a check not answered by then failed"},
    OptionSpec{"health_check.unhealthy_threshold", integer, "3", "consecutive failed checks to mark a worker down"},
    OptionSpec{"health_check.healthy_threshold", integer, "2", "consecutive passed checks to mark it up again"},
    OptionSpec{"health_check.passive_failures", integer, "",
               "deprecated: outlier_detection.consecutive_failures, which it sets when that is not given"},
    OptionSpec{"outlier_detection", section, "",
               "passive: live traffic failures eject a worker (a circuit breaker per worker)"},
    OptionSpec{"outlier_detection.consecutive_failures", integer, "5",
               "connect errors, 5xx, resets, timeouts in a row that eject a worker (0: off)"},
    OptionSpec{"outlier_detection.base_ejection_time", duration, "5s",
               "out of routing this long; doubles with each ejection in a row, then a half-open probe"},
    OptionSpec{"outlier_detection.max_ejection_time", duration, "5m", "the longest ejection"},
    OptionSpec{"outlier_detection.max_ejected_percent", integer, "50",
               "never more of a model's workers out at once (all ejected: routed as if none were)"},
    OptionSpec{"metrics_scrape", section, "",
               "each worker's Prometheus /metrics: engine load (running, waiting, KV usage) and KV capacity"},
    OptionSpec{"metrics_scrape.enabled", boolean, "true", "false: the router uses its own counts only"},
    OptionSpec{"metrics_scrape.path", text, "/metrics", "vLLM, SGLang and llama.cpp all serve it"},
    OptionSpec{"metrics_scrape.interval", duration, "1s", "between two scrapes of a worker"},
    OptionSpec{"metrics_scrape.timeout", duration, "1s",
               "the shortest wait for a scrape; each worker's grows with its page's observed latency (at most 30s)"},
    OptionSpec{"metrics_scrape.max_backoff", duration, "30s",
               "a failing worker is scraped less often, doubling up to this"},
    OptionSpec{"routing", section, "", "the policy and its parameters"},
    OptionSpec{"routing.policy", choice, "cache_aware",
               "cache_aware, session_hash, prefix_hash, least_load, round_robin, dynamo_cost, sglang_cache_aware"},
    OptionSpec{"routing.cache_aware", section, "",
               "expected TTFT = queue delay + prefill of the uncached prompt tokens (ms)"},
    OptionSpec{"routing.cache_aware.prefill_ms_per_token", number, "0.027",
               "prior a: ms per uncached prompt token (8B model, one H100); also prices the queue"},
    OptionSpec{"routing.cache_aware.prefill_ms_per_token_pair", number, "1.31e-6",
               "prior b: causal attention, ms per (query, context) token pair"},
    OptionSpec{"routing.cache_aware.prefill_base_ms", number, "6", "prior c: the fixed part (a scheduler step)"},
    OptionSpec{"routing.cache_aware.prefill_ms_per_active_token", number, "4e-5",
               "prior: ms per prompt token of the requests decoding beside the prefill"},
    OptionSpec{"routing.cache_aware.learn_prefill_cost", boolean, "true", "false: every worker keeps the priors"},
    OptionSpec{"routing.cache_aware.prefill_fit", choice, "relative",
               "relative (the priors times each worker's learned speed over the median), pooled (one fit "
               "from every worker's requests times the speed) or per_worker (learned per worker)"},
    OptionSpec{"routing.cache_aware.own_prefill_weight", number, "",
               "a fixed weight of work (the request's prefill and what it evicts) against the queue in the score "
               "(0.1 to 10); unset: the fleet's price of work, 1 plus the requests waiting for a first token per "
               "worker"},
    OptionSpec{"routing.cache_aware.eviction_term", boolean, "true",
               "on a full worker, add the expected re-prefill of the blocks it evicts"},
    OptionSpec{"routing.cache_aware.move_margin", boolean, "false",
               "a session's turn leaves its previous worker only beyond both workers' calibrated TTFT error"},
    OptionSpec{"routing.cache_aware.congestion_cost", boolean, "false",
               "add what a placement's prefill delays the fleet's next requests, from the fleet's mean queue and "
               "recent traffic"},
    OptionSpec{"routing.cache_aware.soft_margin", duration, "",
               "optional load bound: leave a worker over (1 + load_bound_epsilon) x the mean queue unless the "
               "best one within is worse by more than this"},
    OptionSpec{"routing.cache_aware.load_bound_epsilon", number, "0.25", "the load bound's share over the mean"},
    OptionSpec{"routing.cache_aware.queue_ms_per_request", number, "0.5",
               "per request in flight on the worker (longer decode steps)"},
    OptionSpec{"routing.cache_aware.queue_ms_per_waiting_request", number, "5",
               "per request the engine's metrics report waiting (not yet admitted)"},
    OptionSpec{"routing.cache_aware.engine_metrics_max_age", duration, "5s",
               "an engine scrape older than this is ignored (the gateway's counts only)"},
    OptionSpec{"routing.prefix_hash", section, "", "the prefix_hash policy"},
    OptionSpec{"routing.prefix_hash.prefix_blocks", integer, "4",
               "leading blocks that form the prefix_hash policy's affinity key"},
    OptionSpec{"routing.dynamo_cost", section, "",
               "Dynamo's KV router: argmin of overlap_weight x prefill left + decode load"},
    OptionSpec{"routing.dynamo_cost.overlap_weight", number, "1.0", "the weight of the prefill left"},
    OptionSpec{"routing.sglang_cache_aware", section, "",
               "SGLang's router: when imbalanced, least loaded; else the longest match above the threshold"},
    OptionSpec{"routing.sglang_cache_aware.cache_threshold", number, "0.3",
               "matched share of the prompt below which the least loaded worker is taken"},
    OptionSpec{"routing.sglang_cache_aware.balance_abs_threshold", integer, "64",
               "imbalanced when the busiest worker has this many more requests than the least busy"},
    OptionSpec{"routing.sglang_cache_aware.balance_rel_threshold", number, "1.5", "... and this many times as many"},
    OptionSpec{"routing.receipt", boolean, "false",
               "add x-kvgate-route to every response (else only with x-kvgate-explain: 1)"},
    OptionSpec{"routing.drift", section, "", "cache predictions checked against the engines' usage.cached_tokens"},
    OptionSpec{"routing.drift.enabled", boolean, "true", "false: a worker's index is always credited"},
    OptionSpec{"routing.drift.window", integer, "32", "last informative predictions kept per worker"},
    OptionSpec{"routing.drift.min_samples", integer, "8", "no verdict before this many"},
    OptionSpec{"routing.drift.trip_share", number, "0.8",
               "share over-predicted that marks the worker drifting (its index is not credited)"},
    OptionSpec{"routing.drift.recover_share", number, "0.5", "share that clears it again (below trip_share)"},
    OptionSpec{"sessions", section, "",
               "what the router remembers per session key (from the request's key_from sources)"},
    OptionSpec{"sessions.max_sessions", integer, "65536", "least recently used beyond; about 1 KiB each with 8 turns"},
    OptionSpec{"sessions.idle_ttl", duration, "30m", "a key idle longer starts a new session (reason session_expired)"},
    OptionSpec{"sessions.turns_kept", integer, "8", "last turns per session shown by /debug/sessions/<key>"},
    OptionSpec{"sessions.key_from", list,
               "[header:x-session-id, header:x-claude-code-session-id, header:session-id, header:session_id, "
               "header:x-session-affinity, body:prompt_cache_key, body:user]",
               "where the session key comes from, first present wins: header:NAME or body:NAME (a top-level "
               "string field), at most 16"},
    OptionSpec{"index", section, "", "the prefix index (one per model)"},
    OptionSpec{"index.max_entries", integer, "10000000",
               "(block, worker) pairs kept per model; the least recently used go first"},
    OptionSpec{"index.speculative_ttl", duration, "2s",
               "routing-time inserts on workers with kv_events, until the engine's events confirm them"},
    OptionSpec{"index.approximate_ttl", duration, "10m",
               "routing-time inserts on workers without kv_events (or whose stream broke)"},
    OptionSpec{"index.default_kv_capacity_blocks", integer, "65536",
               "a worker's KV capacity in blocks when neither its kv_capacity_blocks nor its engine says"},
    OptionSpec{"kv_events", section, "", "the engines' KV-event streams"},
    OptionSpec{"kv_events.replay_timeout", duration, "1s",
               "a replay request (after a sequence gap) that has not ended by then has failed"},
    OptionSpec{"kv_events.listen", text, "",
               "a ZMQ address kvgate binds a SUB socket on, for engines that dial out (llm-d-inference-sim, vLLM "
               "with a connecting publisher); workers with kv_events: listen, told apart by the topic "
               "kv@<host:port or host>@<model>"},
    OptionSpec{"kv_events.silence_after", duration, "10s",
               "flag a worker that gets traffic but has sent no KV event for this long"},
    OptionSpec{"cluster", section, "",
               "several kvgate replicas sharing session turns, routing-time inserts and in-flight counts through "
               "a Redis stream; absent: this kvgate runs alone; restart to change"},
    OptionSpec{"cluster.engine", choice, "redis", "redis (Redis 7 or Valkey: a stream every replica reads)"},
    OptionSpec{"cluster.url", text, "redis://127.0.0.1:6379", "the engine's address, redis://host:port"},
    OptionSpec{"cluster.replica_id", text, "",
               "this replica's name among its peers (letters, digits, . _ : -); empty: <hostname>-<pid>"},
    OptionSpec{"cluster.stream", text, "kvgate",
               "the stream's Redis key: replicas naming the same key form one cluster"},
    OptionSpec{"cluster.max_stream_entries", integer, "100000",
               "the stream is trimmed to about this many entries (its memory in Redis)"},
    OptionSpec{"cluster.catch_up", duration, "10m",
               "a starting or reconnecting replica applies the stream's entries from this far back"},
    OptionSpec{"cluster.load_interval", duration, "50ms", "how often this replica publishes its in-flight counts"},
    OptionSpec{"cluster.peer_timeout", duration, "3s", "a peer silent this long: its in-flight counts stop counting"},
    OptionSpec{"cluster.queue", integer, "4096",
               "messages waiting to be published; when full, new ones are dropped (counted), never waited for"},
    OptionSpec{"models", list, "", "the models served, each with its workers (at least one model)"},
    OptionSpec{"models[].name", text, "", "matched against the request's \"model\" (required)"},
    OptionSpec{"models[].tokenizer", text, "",
               "the model's folder (tokenizer.json, tokenizer_config.json): exact tokens; empty: the "
               "approximation"},
    OptionSpec{"models[].stand_in_tokenizer", choice, "kvgate",
               "without a tokenizer folder, whose stand-in tokens the engines compute: kvgate (kvgate's "
               "approximation, as kvgate-sim) or llm_d_inference_sim (llm-d's simulator with its simulated "
               "tokenizer: a model name not on Hugging Face, or --force-dummy-tokenizer)"},
    OptionSpec{"models[].block_size", integer, "16", "must equal the engines' KV block size"},
    OptionSpec{"models[].adapters", list, "",
               "LoRA adapters the workers serve (vLLM --lora-modules names): a request naming one as \"model\" "
               "goes to these workers, in the adapter's own cache partition; at most 256, unique across models"},
    OptionSpec{"models[].discover_adapters", boolean, "false",
               "also serve the adapters the workers' engines list in GET /v1/models (parent: this model), read "
               "every 5 s with the metrics"},
    OptionSpec{"models[].max_loras", integer, "1",
               "adapters a worker holds at once (vLLM --max-loras) when its engine does not report it"},
    OptionSpec{"models[].lora_load", duration, "100ms",
               "loading an adapter a worker does not hold, before the prefill (cache_aware prices it)"},
    OptionSpec{"models[].attention", section, "",
               "local-attention layers beside full attention, for workers without KV events (events that name "
               "their cache groups win); neither key: full attention only"},
    OptionSpec{"models[].attention.sliding_window", integer, "",
               "tokens in the sliding window (Gemma 3: 1024, gpt-oss: 128)"},
    OptionSpec{"models[].attention.chunked_local", integer, "",
               "tokens per chunk of chunked local attention (Llama 4: 8192)"},
    OptionSpec{"models[].attention.local_groups", integer, "1",
               "vLLM's cache groups of the local kind, each a block per position (its layers split into groups of "
               "equal size: Gemma 3 5, gpt-oss 1)"},
    OptionSpec{"models[].disaggregation", section, "",
               "a model whose workers have roles (prefill, decode): how the two phases reach the engines"},
    OptionSpec{"models[].disaggregation.protocol", choice, "vllm",
               "vllm (prefill first with kv_transfer_params, then the decoder) or sglang (both at once with the "
               "prefill worker's bootstrap host, port and room)"},
    OptionSpec{"models[].disaggregation.transfer_gbps", number, "25",
               "the KV link between the pools in GB/s (prices moving the prompt's KV; learned from transfers)"},
    OptionSpec{"models[].disaggregation.local_prefill_tokens", integer, "512",
               "the decoder prefills itself when it lacks at most this many of the prompt's tokens"},
    OptionSpec{"models[].disaggregation.local_prefill_ratio", number, "1",
               "... or when it holds at least this share of the prompt (1: never by share; a share lets long "
               "remainders stall the decoder's streams)"},
    OptionSpec{"models[].workers", list, "", "the configured workers"},
    OptionSpec{"models[].workers[].id", text, "", "unique across the file; labels metrics and logs (required)"},
    OptionSpec{"models[].workers[].url", text, "", "http://host:port of the engine (required)"},
    OptionSpec{"models[].workers[].kv_events", text, "",
               "the engine's ZMQ KV-event publisher, tcp://host:port; listen: its engine publishes to "
               "kv_events.listen"},
    OptionSpec{"models[].workers[].kv_events_replay", text, "", "the engine's replay (ROUTER) socket"},
    OptionSpec{"models[].workers[].kv_capacity_blocks", integer, "",
               "the engine's GPU KV blocks; unset: what its metrics say, else index.default_kv_capacity_blocks"},
    OptionSpec{"models[].workers[].scrape_interval", duration, "",
               "this worker's metrics_scrape.interval (an engine serving /metrics behind inference wants more)"},
    OptionSpec{"models[].workers[].scrape_timeout", duration, "", "this worker's metrics_scrape.timeout"},
    OptionSpec{"models[].workers[].upstream_api_key_file", text, "",
               "a file holding the engine's --api-key, sent as Authorization (wins over the model's)"},
    OptionSpec{"models[].workers[].upstream_api_key_env", text, "", "or: an environment variable holding it"},
    OptionSpec{"models[].workers[].engine", choice, "",
               "vllm, sglang or llamacpp; unset: what the engine's /metrics names say (vllm until it answers)"},
    OptionSpec{"models[].workers[].cache_model", choice, "",
               "without kv_events: blocks (an LRU of routed blocks) or sequences (whole prompts in slots); unset: "
               "sequences for llama.cpp, else blocks"},
    OptionSpec{"models[].workers[].slots", integer, "",
               "sequences: the engine's slots (llama-server -np); unset: llama-server's /props total_slots"},
    OptionSpec{"models[].workers[].slot_similarity", number, "0.1", "sequences: llama-server --slot-prompt-similarity"},
    OptionSpec{"models[].workers[].cache_ram_mib", integer, "",
               "sequences: llama-server --cache-ram, its host-RAM prompt cache in MiB; unset: llama.cpp's default "
               "(8192) until the worker's answers show it keeps none"},
    OptionSpec{"models[].workers[].role", choice, "both",
               "both (an aggregated engine), prefill or decode (a disaggregated fleet: the model needs "
               "disaggregation)"},
    OptionSpec{"models[].workers[].bootstrap_port", integer, "8998",
               "a SGLang prefill worker's --disaggregation-bootstrap-port"},
    OptionSpec{"models[].workers_from", section, "", "workers found at run time, added to the listed ones"},
    OptionSpec{"models[].workers_from.dns", section, "",
               "every A/AAAA address of a name (e.g. a headless Service) is a worker with id address:port"},
    OptionSpec{"models[].workers_from.dns.name", text, "", "the name to resolve (required)"},
    OptionSpec{"models[].workers_from.dns.port", integer, "", "the engines' port (required)"},
    OptionSpec{"models[].workers_from.dns.interval", duration, "10s", "between two lookups"},
    OptionSpec{"models[].workers_from.dns.kv_events", text, "",
               "e.g. tcp://{host}:5557 ({host}: the address), or listen"},
    OptionSpec{"models[].workers_from.dns.kv_events_replay", text, "", "e.g. tcp://{host}:5558"},
    OptionSpec{"models[].workers_from.dns.nameserver", text, "",
               "ip:port of the DNS server; empty: the system's resolv.conf (a pod's cluster DNS)"},
    OptionSpec{"models[].workers_from.dns.kv_capacity_blocks", integer, "", "as a listed worker's"},
    OptionSpec{"models[].workers_from.dns.engine", choice, "", "as a listed worker's"},
    OptionSpec{"models[].workers_from.dns.cache_model", choice, "", "as a listed worker's"},
    OptionSpec{"models[].workers_from.dns.slots", integer, "", "as a listed worker's"},
    OptionSpec{"models[].workers_from.dns.slot_similarity", number, "0.1", "as a listed worker's"},
    OptionSpec{"models[].workers_from.dns.cache_ram_mib", integer, "", "as a listed worker's"},
    OptionSpec{"models[].workers_from.file", text, "",
               "a YAML or JSON file `workers: [...]` of workers as listed ones, re-read when it changes"},
    OptionSpec{"models[].cache_isolation", choice, "none",
               "none (tenants share the engines' prefix cache) or tenant (a per-tenant cache_salt)"},
    OptionSpec{"models[].upstream_api_key_file", text, "",
               "a file holding the engines' --api-key, sent as Authorization by every worker of the model"},
    OptionSpec{"models[].upstream_api_key_env", text, "", "or: an environment variable holding it"},
    OptionSpec{"models[].kv_bytes_per_token", number, "",
               "one token's KV bytes: prices loading a prefix held in a lower tier and moving KV between prefill "
               "and decode workers; unset: from the tokenizer folder's config.json (layers x KV heads x head size x "
               "2 x the dtype's bytes; for latent attention the latent), else 131072 (Llama-3-8B in BF16); set it "
               "for an FP8 KV cache"},
    OptionSpec{"models[].offload_gbps", number, "25", "the lower tier's load bandwidth in GB/s"},
};

}  // namespace

std::span<const OptionSpec> option_table() {
  return kOptions;
}

std::vector<std::string_view> keys_under(std::string_view path) {
  std::vector<std::string_view> keys;
  for (const auto& option : kOptions) {
    std::string_view key = option.path;
    if (!path.empty()) {
      if (!key.starts_with(path) || key.size() <= path.size() + 1 || key[path.size()] != '.') {
        continue;
      }
      key.remove_prefix(path.size() + 1);
    }
    if (key.find('.') == std::string_view::npos) {
      keys.push_back(key.ends_with("[]") ? key.substr(0, key.size() - 2) : key);
    }
  }
  return keys;
}

namespace {

// A table cell's text: a bare | would end the cell.
std::string escape_pipes(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    if (c == '|') {
      escaped += '\\';
    }
    escaped += c;
  }
  return escaped;
}

}  // namespace

std::string configuration_reference() {
  std::string text =
      "# Configuration reference\n\n"
      "Every key kvgate reads, generated from its option table (`kvgate config-reference`). The file is "
      "strict: an unknown key, a wrong type or a value out of range is reported with its file, line and key "
      "path, and nothing starts. `config/kvgate.example.yaml` shows every key in place with its default. "
      "Durations are written 250ms, 5s, 2m or 1h; sizes in bytes or with KiB, MiB, GiB (1024) or KB, MB, GB "
      "(1000). `[]` marks the items of a list.\n";
  std::string_view current;
  for (const auto& option : kOptions) {
    const std::string_view top = option.path.substr(0, option.path.find_first_of(".["));
    const bool grouped = option.path != top || option.kind == OptionKind::section || option.kind == OptionKind::list;
    const std::string_view title = grouped ? top : std::string_view("top level");
    if (title != current) {
      current = title;
      text += "\n## " + std::string(title) + "\n\n| key | type | default | meaning |\n|---|---|---|---|\n";
    }
    text += "| `" + std::string(option.path) + "` | " + std::string(to_string(option.kind)) + " | " +
            (option.default_text.empty() ? std::string("-") : "`" + std::string(option.default_text) + "`") + " | " +
            escape_pipes(option.doc) + " |\n";
  }
  return text;
}

}  // namespace kvgate::config
