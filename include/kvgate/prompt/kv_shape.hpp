#pragma once
// One token's KV-cache bytes, from the model's Hugging Face config
// (config.json beside the tokenizer), as vLLM sizes its cache per layer:
// keys and values of every KV head (FullAttentionSpec: 2 x num_kv_heads x
// head_size x dtype bytes), or for multi-head latent attention (DeepSeek
// V2/V3) the one compressed latent each layer keeps (MLAAttentionSpec:
// kv_lora_rank + qk_rope_head_dim, no separate values). Sliding-window
// layers keep as many bytes per token as full ones; they keep fewer tokens.
// Multimodal configs (Gemma 3, Llama 4) hold the language model's in
// text_config. The dtype is the model's (torch_dtype, or dtype in newer
// configs): an engine running an FP8 KV cache keeps half of it, which the
// configuration's kv_bytes_per_token can say.
//
// Pure: a JSON value in, the figure and how it was found out.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "kvgate/core/result.hpp"

namespace kvgate::prompt {

struct KvShape {
  double bytes_per_token = 0;
  std::string derivation;  // e.g. "32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes (bfloat16)"
};

// Errors name the missing or malformed field.
Result<KvShape, std::string> kv_shape_from_config(const nlohmann::json& config);

}  // namespace kvgate::prompt
