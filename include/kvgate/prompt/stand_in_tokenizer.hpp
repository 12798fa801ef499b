#pragma once
// Whose stand-in tokenisation a model's engines use when kvgate has no
// tokenizer folder for it (models[].stand_in_tokenizer).

namespace kvgate::prompt {

enum class StandInTokenizer {
  kvgate,               // kvgate's approximation (approximate_prompt.hpp), as kvgate-sim computes it
  llm_d_inference_sim,  // llm-d-inference-sim's simulated tokenizer (llmd_sim_prompt.hpp)
};

}  // namespace kvgate::prompt
