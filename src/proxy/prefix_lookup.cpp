#include "kvgate/proxy/prefix_lookup.hpp"

#include <algorithm>
#include <chrono>

#include <ctime>

#include "kvgate/openai/prompt.hpp"
#include "kvgate/prompt/exact_tokens.hpp"
#include "kvgate/tokenizer/approximate.hpp"

namespace kvgate::proxy {

namespace {

// The clock strftime_now reads in chat templates: the gateway's local time,
// as the engine's would be.
std::tm local_now() {
  // localtime_r consults the time zone on every call; once a second is enough.
  thread_local std::time_t converted = -1;
  thread_local std::tm local{};
  std::time_t now = std::time(nullptr);
  if (now != converted) {
    localtime_r(&now, &local);
    converted = now;
  }
  return local;
}

}  // namespace

Result<PromptBlocks, openai::ApiError> prompt_blocks(const ModelRoute& model, const openai::RequestSummary& request) {
  PromptBlocks result;
  std::vector<prefix::TokenId> tokens;
  if (model.tokenizer) {
    // Each io thread encodes with its own workspace; the segment cache in it
    // remembers the sections of recent prompts.
    thread_local tokenizer::EncodeWorkspace workspace;
    auto hits = workspace.segment_cache_hits();
    auto misses = workspace.segment_cache_misses();
    auto exact = prompt::exact_prompt_tokens(*model.tokenizer, request, workspace, {local_now()});
    if (!exact) {
      const auto& problem = exact.error();
      return unexpected(openai::invalid_request(problem.message, problem.param,
                                                problem.template_failed ? "chat_template_error" : "invalid_value"));
    }
    tokens = std::move(*exact);
    result.exact = true;
    result.segment_hits = workspace.segment_cache_hits() - hits;
    result.segment_misses = workspace.segment_cache_misses() - misses;
  } else {
    tokens = tokenizer::approximate_prompt_tokens(
        request.chat_body ? openai::extract_prompt(*request.chat_body, openai::Endpoint::chat_completions)
                          : request.prompt);
  }
  if (tokens.empty() || tokens.size() > UINT32_MAX) {
    return result;
  }
  result.input_tokens = static_cast<std::uint32_t>(tokens.size());
  auto seed = prefix::partition_seed({model.name, "", request.cache_salt.value_or("")});
  result.blocks = prefix::hash_blocks(tokens, model.block_size, seed);
  return result;
}

std::vector<std::uint32_t> predicted_cached_tokens(const ModelRoute& model, const PromptBlocks& prompt) {
  std::vector<std::uint32_t> cached(model.workers.size(), 0);
  if (prompt.input_tokens == 0 || prompt.blocks.empty() || !model.cache) {
    return cached;
  }
  const std::uint32_t reusable_blocks = (prompt.input_tokens - 1) / model.block_size;
  auto match = model.cache->index.longest_prefix(prompt.blocks);
  for (std::size_t worker = 0; worker < cached.size(); ++worker) {
    cached[worker] = std::min(match.blocks[model.slots[worker]], reusable_blocks) * model.block_size;
  }
  return cached;
}

policy::WorkerView worker_view(const workers::WorkerState& worker, std::uint32_t cached_tokens) {
  // An engine that stopped answering scrapes is judged by kvgate's own
  // counts only (several missed scrapes at the default 1 s interval).
  constexpr std::uint64_t kScrapeMaxAgeMs = 5'000;
  std::uint32_t engine_waiting = 0;
  if (auto scraped = worker.engine_load(); scraped && scraped->load.waiting) {
    auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count());
    if (now - scraped->unix_ms <= kScrapeMaxAgeMs) {
      engine_waiting = static_cast<std::uint32_t>(std::max(0.0, *scraped->load.waiting));
    }
  }
  return {worker.id(),   worker.healthy(), worker.in_flight(), worker.pending_prefill_tokens(),
          cached_tokens, engine_waiting};
}

}  // namespace kvgate::proxy
