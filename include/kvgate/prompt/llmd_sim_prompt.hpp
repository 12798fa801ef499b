#pragma once
// A request's prompt tokens as llm-d-inference-sim computes them with its
// simulated tokenizer (tokenizer/llmd_sim.hpp), for a model served by that
// simulator (models[].stand_in_tokenizer: llm_d_inference_sim).
//
// Source: llm-d-inference-sim v0.10.2, pkg/tokenizer/tokenizer.go
// (SimpleTokenizer.RenderMessages) and pkg/api/response.go
// (Message.PlainText). A chat is rendered as, for each message:
//   "### " + role [+ "(" + tool_call_id + ")"] + ": " + content
//   + for each tool call with a name: "[" + name + "(" + arguments + ")]"
//   + "\n"
// where content is the string, or the list's parts joined by "\n" (a
// "text" part's text; an "image_url" part as "image: " + its url). No
// generation prompt follows. A text prompt is tokenised as it is; token
// ids are taken as given.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "kvgate/core/token.hpp"
#include "kvgate/openai/request.hpp"

namespace kvgate::prompt {

// The rendered chat of a chat body ("messages"); any JSON value is taken,
// members of the wrong type count as absent.
std::string render_llmd_sim_chat(const nlohmann::ordered_json& body);

std::vector<TokenId> llmd_sim_prompt_tokens(const openai::RequestSummary& request);

}  // namespace kvgate::prompt
