#pragma once
// A model's chat template (the Jinja `chat_template` of tokenizer_config.json)
// compiled once and rendered per request, as the engines render it: the
// reference is @huggingface/jinja with trim_blocks and lstrip_blocks, which
// is how transformers (and so vLLM and SGLang) configure Jinja. Rendering is
// pure: the clock strftime_now reads is an input.
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvgate/chat_template/value.hpp"
#include "kvgate/core/result.hpp"

namespace kvgate::chat_template {

class IterationMemo;

// What incremental rendering remembers between renders: the loop iterations
// of earlier prompts (each message's part of a chat), replayed when the next
// turn resends the same messages in the same state. The result is the full
// render's, byte for byte (src/chat_template/memo.hpp says why). Holds
// strings of earlier requests, up to `capacity_bytes`. Not synchronised: one
// per thread.
//
// An iteration is kept only when it wrote at least `min_output_bytes` or
// took at least `min_steps` evaluation steps: a short one costs about as
// much to replay as to evaluate, and recording it costs more (the
// benchmarks chat_next_turn and chat_next_turn_short show it). Tests
// keep everything (0, 0) to check every iteration's replay.
class RenderCache {
 public:
  static constexpr std::size_t kDefaultCapacityBytes = 64u << 20;
  static constexpr std::size_t kDefaultMinOutputBytes = 256;
  static constexpr std::uint64_t kDefaultMinSteps = 128;

  explicit RenderCache(std::size_t capacity_bytes = kDefaultCapacityBytes,
                       std::size_t min_output_bytes = kDefaultMinOutputBytes,
                       std::uint64_t min_steps = kDefaultMinSteps);
  ~RenderCache();
  RenderCache(const RenderCache&) = delete;
  RenderCache& operator=(const RenderCache&) = delete;

  [[nodiscard]] std::size_t bytes() const;
  [[nodiscard]] std::uint64_t replayed_iterations() const;
  [[nodiscard]] std::uint64_t evaluated_iterations() const;

 private:
  friend class ChatTemplate;
  std::unique_ptr<IterationMemo> memo_;
};

struct RenderInput {
  Value messages;  // list of message mappings
  Value tools;     // list, or undefined when the request has none
  bool add_generation_prompt = true;
  Value bos_token;  // string or none
  Value eos_token;
  Mapping extra;                 // chat_template_kwargs (e.g. enable_thinking), set as variables
  std::tm now{};                 // for strftime_now
  std::size_t output_limit = 0;  // bytes; 0 = unlimited
  // Expressions and statements evaluated before the render gives up, so a
  // template that loops without output cannot hang a thread; 0 = unlimited.
  std::uint64_t step_limit = 0;
  RenderCache* cache = nullptr;  // null: render every iteration
};

class ChatTemplate {
 public:
  // Errors name what the parser could not read.
  static Result<ChatTemplate, std::string> compile(std::string_view source);

  // The rendered prompt, or the template's error (including the message of
  // raise_exception) for a 400 to the client.
  [[nodiscard]] Result<std::string, std::string> render(const RenderInput& input) const;

  // Whether the template loops over a message's content (vLLM's "openai"
  // content format: list content is passed through); otherwise list content
  // is flattened to its text parts joined by newlines before rendering.
  [[nodiscard]] bool iterates_content() const { return iterates_content_; }

  struct Program;

 private:
  ChatTemplate(std::shared_ptr<const Program> program, bool iterates_content)
      : program_(std::move(program)), iterates_content_(iterates_content) {}
  std::shared_ptr<const Program> program_;
  bool iterates_content_ = false;
};

}  // namespace kvgate::chat_template
