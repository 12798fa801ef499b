#include "sim_options.hpp"

#include <charconv>
#include <functional>
#include <map>

namespace kvgate::sim {
namespace {

template <class Number>
bool parse_number(const std::string& text, Number& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc{} && end == text.data() + text.size();
}

using Setter = std::function<bool(const std::string&)>;

template <class Number>
Setter number(Number& target, Number min) {
  return [&target, min](const std::string& text) { return parse_number(text, target) && target >= min; };
}

Setter text(std::string& target) {
  return [&target](const std::string& value) {
    target = value;
    return !value.empty();
  };
}

}  // namespace

std::string sim_usage() {
  return "usage: kvgate-sim --model NAME [--id NAME] [--tokenizer DIR] [--port P] [--host 127.0.0.1] [--block-size "
         "16]\n"
         "         [--num-gpu-blocks N]\n"
         "         [--max-model-len N] [--max-num-seqs N] [--max-num-batched-tokens N]\n"
         "         [--kv-events-endpoint tcp://127.0.0.1:5557] [--kv-events-replay-endpoint tcp://127.0.0.1:5558]\n"
         "         [--kv-events-topic TOPIC] [--kv-events-connect tcp://HOST:PORT]\n"
         "         [--kv-events-format map|array|sglang] [--hash-seed N] [--time-scale X] [--default-max-tokens N]\n"
         "         [--step-overhead-ms X] [--prefill-ms-per-token X] [--decode-ms-per-seq X]\n"
         "         [--attention-ms-per-context-token X]\n"
         "         [--cpu-offload-blocks N] [--cpu-offload-gbps X] [--kv-bytes-per-token N]\n"
         "         [--engine-profile vllm|sglang|llamacpp] [--slots N] [--slot-similarity X] [--cache-ram MIB]\n"
         "         [--lora-adapters NAME,NAME,...] [--max-loras N] [--lora-load-ms X]\n"
         "         [--kv-groups full,sliding_window:W,...] [--role both|prefill|decode] [--transfer-gbps X]\n";
}

std::optional<std::string> parse_sim_options(const std::vector<std::string>& args, SimOptions& options) {
  std::string format = "map";
  std::string profile = "vllm";
  std::string role = "both";
  std::uint64_t cache_ram_mib = 0;
  std::uint64_t seed = 0;
  bool seed_given = false;
  std::map<std::string, Setter> flags{
      {"--host", text(options.host)},
      {"--port", number(options.port, std::uint16_t{0})},
      {"--model", text(options.model)},
      {"--id", text(options.id)},
      {"--tokenizer", text(options.tokenizer)},
      {"--block-size", number(options.block_size, 1u)},
      {"--num-gpu-blocks", number(options.num_gpu_blocks, 1u)},
      {"--max-model-len", number(options.max_model_len, 1u)},
      {"--max-num-seqs", number(options.limits.max_num_seqs, 1u)},
      {"--max-loras", number(options.limits.max_loras, 1u)},
      {"--lora-load-ms", number(options.limits.lora_load_ms, 0.0)},
      {"--max-num-batched-tokens", number(options.limits.max_num_batched_tokens, 1u)},
      {"--kv-events-endpoint", text(options.kv_events_endpoint)},
      {"--kv-events-replay-endpoint", text(options.kv_events_replay_endpoint)},
      {"--kv-events-topic", text(options.kv_events_topic)},
      {"--kv-events-connect", text(options.kv_events_connect)},
      {"--kv-events-format", text(format)},
      {"--hash-seed", [&](const std::string& value) { return seed_given = parse_number(value, seed); }},
      {"--lora-adapters",
       [&](const std::string& value) {
         options.lora_adapters.clear();
         std::string::size_type start = 0;
         while (start <= value.size()) {
           auto end = value.find(',', start);
           auto name = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
           if (name.empty()) {
             return false;
           }
           options.lora_adapters.push_back(name);
           if (end == std::string::npos) {
             break;
           }
           start = end + 1;
         }
         return true;
       }},
      {"--kv-groups",
       [&](const std::string& value) {
         // A hybrid model's cache groups: one full, then sliding windows
         // of one size (vLLM groups layers of one kind into groups of
         // equal size: Gemma 3's five sliding layers to one global give
         // several sliding groups beside the full one).
         auto& groups = options.limits.groups;
         groups.clear();
         std::string::size_type start = 0;
         while (start <= value.size()) {
           auto end = value.find(',', start);
           auto item = value.substr(start, end == std::string::npos ? std::string::npos : end - start);
           constexpr std::string_view kSliding = "sliding_window:";
           std::uint32_t window = 0;
           if (item == "full") {
             if (!groups.empty()) {
               return false;
             }
           } else if (item.starts_with(kSliding) && parse_number(item.substr(kSliding.size()), window) && window >= 2) {
             if (groups.empty() || (groups.size() > 1 && groups.back().window != window)) {
               return false;
             }
           } else {
             return false;
           }
           groups.push_back(CacheGroup{window});
           if (end == std::string::npos) {
             break;
           }
           start = end + 1;
         }
         return groups.size() >= 2;
       }},
      {"--time-scale", number(options.time_scale, 0.000001)},
      {"--default-max-tokens", number(options.default_max_tokens, 1u)},
      {"--step-overhead-ms", number(options.cost.overhead_ms, 0.0)},
      {"--prefill-ms-per-token", number(options.cost.prefill_ms_per_token, 0.0)},
      {"--decode-ms-per-seq", number(options.cost.decode_ms_per_sequence, 0.0)},
      {"--attention-ms-per-context-token", number(options.cost.attention_ms_per_context_token, 0.0)},
      {"--cpu-offload-blocks", number(options.limits.cpu_offload_blocks, 0u)},
      {"--cpu-offload-gbps", number(options.cpu_offload_gbps, 0.001)},
      {"--kv-bytes-per-token", number(options.kv_bytes_per_token, 1.0)},
      {"--engine-profile", text(profile)},
      {"--role", text(role)},
      {"--transfer-gbps", number(options.transfer_gbps, 0.001)},
      {"--slots", number(options.limits.slots, 1u)},
      {"--slot-similarity", number(options.limits.slot_similarity, 0.0)},
      {"--cache-ram", number(cache_ram_mib, std::uint64_t{0})},
  };
  for (std::size_t index = 0; index < args.size(); index += 2) {
    auto flag = flags.find(args[index]);
    if (flag == flags.end()) {
      return "unknown flag '" + args[index] + "'";
    }
    if (index + 1 >= args.size() || !flag->second(args[index + 1])) {
      return "invalid or missing value for " + args[index];
    }
  }
  if (!options.kv_events_replay_endpoint.empty() && options.kv_events_endpoint.empty()) {
    return std::string("--kv-events-replay-endpoint needs --kv-events-endpoint");
  }
  if ((!options.kv_events_topic.empty() || !options.kv_events_connect.empty()) && options.kv_events_endpoint.empty()) {
    return std::string("--kv-events-topic and --kv-events-connect need --kv-events-endpoint");
  }
  if (options.model.empty()) {
    return std::string("--model is required");
  }
  if (format != "map" && format != "array" && format != "sglang") {
    return "--kv-events-format must be map, array or sglang, not '" + format + "'";
  }
  options.kv_events_format = format == "map"     ? EventFormat::map
                             : format == "array" ? EventFormat::array
                                                 : EventFormat::sglang;
  if (profile != "vllm" && profile != "sglang" && profile != "llamacpp") {
    return "--engine-profile must be vllm, sglang or llamacpp, not '" + profile + "'";
  }
  options.profile = profile == "vllm"     ? EngineProfile::vllm
                    : profile == "sglang" ? EngineProfile::sglang
                                          : EngineProfile::llamacpp;
  if (options.profile == EngineProfile::llamacpp) {
    if (!options.kv_events_endpoint.empty()) {
      return std::string("--engine-profile llamacpp publishes no KV events (llama-server has none)");
    }
    if (options.limits.slots == 0) {
      options.limits.slots = 4;  // llama-server's -np when left to choose
    }
    options.limits.slot_ram_tokens =
        static_cast<std::uint64_t>(static_cast<double>(cache_ram_mib) * 1024 * 1024 / options.kv_bytes_per_token);
  } else if (options.limits.slots != 0 || cache_ram_mib != 0) {
    return std::string("--slots and --cache-ram need --engine-profile llamacpp");
  }
  if (!options.limits.groups.empty()) {
    if (options.profile != EngineProfile::vllm || options.kv_events_format != EventFormat::map ||
        options.limits.cpu_offload_blocks != 0) {
      return std::string(
          "--kv-groups is vLLM's hybrid KV cache: --engine-profile vllm, --kv-events-format map, "
          "no --cpu-offload-blocks");
    }
    const auto groups = static_cast<std::uint64_t>(options.limits.groups.size());
    if (static_cast<std::uint64_t>(options.num_gpu_blocks) * options.block_size < options.max_model_len * groups) {
      return std::string("--num-gpu-blocks x --block-size must hold --max-model-len tokens in every --kv-groups group");
    }
  }
  if (role != "both" && role != "prefill" && role != "decode") {
    return "--role must be both, prefill or decode, not '" + role + "'";
  }
  options.role = role == "prefill" ? SimRole::prefill : role == "decode" ? SimRole::decode : SimRole::both;
  if (options.role != SimRole::both && (options.profile == EngineProfile::llamacpp || !options.limits.groups.empty())) {
    return std::string("--role prefill|decode is vLLM's or SGLang's paged cache: not with llamacpp or --kv-groups");
  }
  if (seed_given) {
    options.hash_seed = seed;
  }
  // GB/s is 1e6 bytes per millisecond.
  options.cost.load_ms_per_offloaded_block =
      options.kv_bytes_per_token * options.block_size / (options.cpu_offload_gbps * 1e6);
  if (static_cast<std::uint64_t>(options.num_gpu_blocks) * options.block_size < options.max_model_len) {
    return std::string("--num-gpu-blocks x --block-size must hold at least --max-model-len tokens");
  }
  return std::nullopt;
}

}  // namespace kvgate::sim
