#include "kvgate/prompt/kv_shape.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

namespace kvgate::prompt {

namespace {

// A positive integer field, or 0 when absent or not one.
std::uint64_t positive(const nlohmann::json& config, const char* key) {
  const auto found = config.find(key);
  if (found == config.end() || !found->is_number_integer() || found->get<std::int64_t>() <= 0) {
    return 0;
  }
  return found->get<std::uint64_t>();
}

// The dtype's bytes and its name; float16 and bfloat16 (nearly every
// served model) when the config names none.
std::pair<double, std::string> dtype_bytes(const nlohmann::json& config) {
  std::string name = "bfloat16";
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (auto found = config.find(key); found != config.end() && found->is_string()) {
      name = found->get<std::string>();
      break;
    }
  }
  if (name == "float32") {
    return {4.0, name};
  }
  if (name == "float8_e4m3fn" || name == "float8_e5m2") {
    return {1.0, name};
  }
  return {2.0, name};
}

}  // namespace

Result<KvShape, std::string> kv_shape_from_config(const nlohmann::json& root) {
  if (!root.is_object()) {
    return unexpected(std::string("not a JSON object"));
  }
  const auto text = root.find("text_config");
  const auto& config = text != root.end() && text->is_object() ? *text : root;
  const auto layers = positive(config, "num_hidden_layers");
  if (layers == 0) {
    return unexpected(std::string("no num_hidden_layers"));
  }
  auto [bytes, dtype] = dtype_bytes(config.contains("torch_dtype") || config.contains("dtype") ? config : root);
  const auto latent = positive(config, "kv_lora_rank");
  if (latent > 0) {
    const auto rope = positive(config, "qk_rope_head_dim");
    const double per_token = static_cast<double>(layers * (latent + rope)) * bytes;
    return KvShape{per_token, std::to_string(layers) + " layers x (" + std::to_string(latent) + " latent + " +
                                  std::to_string(rope) + " rope) x " + std::to_string(static_cast<int>(bytes)) +
                                  " bytes (" + dtype + ")"};
  }
  const auto heads = positive(config, "num_attention_heads");
  auto kv_heads = positive(config, "num_key_value_heads");
  if (kv_heads == 0) {
    kv_heads = heads;  // multi-head attention: every head keeps its KV
  }
  auto head_dim = positive(config, "head_dim");
  if (head_dim == 0 && heads > 0) {
    head_dim = positive(config, "hidden_size") / heads;
  }
  if (kv_heads == 0 || head_dim == 0) {
    return unexpected(std::string("no num_key_value_heads / num_attention_heads, or no head_dim / hidden_size"));
  }
  const double per_token = static_cast<double>(layers * kv_heads * head_dim * 2) * bytes;
  return KvShape{per_token, std::to_string(layers) + " layers x " + std::to_string(kv_heads) + " KV heads x " +
                                std::to_string(head_dim) + " x 2 (K, V) x " + std::to_string(static_cast<int>(bytes)) +
                                " bytes (" + dtype + ")"};
}

}  // namespace kvgate::prompt
