#pragma once
// kvgate-sim's command line (contract: ../shared/docs/contract.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine.hpp"
#include "kv_event_encoder.hpp"

namespace kvgate::sim {

// Whose wire formats the replica reproduces: metric names, stream and
// error shapes, the usage fields. llamacpp also caches as llama-server does
// (EngineLimits::slots) and publishes no KV events.
enum class EngineProfile : std::uint8_t { vllm, sglang, llamacpp };

// A disaggregated fleet's part (vLLM's KV connectors, SGLang's PD mode):
// prefill computes prompts and hands their KV over; decode receives it (or
// prefills a request sent without transfer fields itself); both is an
// aggregated engine.
enum class SimRole : std::uint8_t { both, prefill, decode };

struct SimOptions {
  EngineProfile profile = EngineProfile::vllm;
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string model;
  std::string id = "sim";  // names this replica in a response header and /metrics
  // A model folder (tokenizer.json + tokenizer_config.json): prompts are
  // tokenised exactly as the gateway does for such a model (chat template,
  // then the tokenizer). Empty: the approximate tokenisation.
  std::string tokenizer;
  std::uint32_t block_size = 16;
  std::uint32_t num_gpu_blocks = 8192;
  std::uint32_t max_model_len = 32768;
  EngineLimits limits;
  // Per-step cost of Llama-3-8B in BF16 on one H100 SXM, derived from the
  // spec sheet (989 TFLOP/s dense, 3.35 TB/s HBM3) and the model's shapes:
  // a step reads the 16 GB of weights (~5 ms) plus launch overhead; a
  // prompt token costs 2 x 8e9 FLOP at ~60% utilisation; a context token's
  // KV (128 KiB with 8 KV heads x 128 dims x 32 layers, BF16) is read once
  // per step by its sequence. See bench/sim/README.md.
  StepCost cost{6.0, 0.027, 0.05, 0.00004};
  double time_scale = 1.0;  // >1 runs faster than real time
  // The CPU tier's (limits.cpu_offload_blocks) copy-back bandwidth; a
  // block's bytes are kv_bytes_per_token x block_size (the default:
  // Llama-3-8B's 128 KiB per token in BF16).
  double cpu_offload_gbps = 25;  // PCIe 4.0 x16, effective
  double kv_bytes_per_token = 131'072;
  std::string kv_events_endpoint;
  std::string kv_events_replay_endpoint;
  std::string kv_events_topic;    // vLLM's KV-events `topic`: the first frame of each batch
  std::string kv_events_connect;  // also dial this subscriber (one that binds, as llm-d's picker)
  EventFormat kv_events_format = EventFormat::map;
  std::uint32_t replay_buffer_batches = 10'000;
  std::optional<std::uint64_t> hash_seed;  // random when absent
  std::uint32_t default_max_tokens = 16;
  // LoRA adapters served on the model (vLLM's --lora-modules names): a
  // request naming one runs in that adapter's cache partition and its KV
  // events carry lora_name; /v1/models lists them with their parent.
  std::vector<std::string> lora_adapters;
  SimRole role = SimRole::both;
  // The KV link between the pools (a decoder waits the lacking tokens' KV
  // bytes over it before admitting a remotely prefilled request).
  double transfer_gbps = 25;
};

// Parses argv; on error returns the message (the caller prints usage).
std::optional<std::string> parse_sim_options(const std::vector<std::string>& args, SimOptions& options);
std::string sim_usage();

}  // namespace kvgate::sim
