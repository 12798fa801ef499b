// Tokenizer throughput and load cost on a real tokenizer (Qwen3 by default;
// KVGATE_BENCH_TOKENIZER=<family> picks another from .cache/tokenizers).
// Texts are the corpus documents of one kind (prose, code), so the numbers
// compare directly with bench/tokenizer/reference.mjs on the same bytes;
// bench/tokenizer/run.sh runs both and prints the ratio.
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../support/adversarial_text.hpp"
#include "../support/resident_memory.hpp"
#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/jsonio/parse.hpp"
#include "kvgate/prompt/chat_request.hpp"
#include "kvgate/prompt/model_tokenizer.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace {

using kvgate::TokenId;
using kvgate::tokenizer::EncodeWorkspace;
using kvgate::tokenizer::Tokenizer;

std::string family() {
  const char* chosen = std::getenv("KVGATE_BENCH_TOKENIZER");
  return chosen ? chosen : "qwen3";
}

std::string tokenizer_folder() {
  return std::string(KVGATE_TOKENIZERS_DIR) + "/" + family();
}

std::vector<std::string> corpus_documents(const std::string& kind) {
  gzFile file = gzopen(KVGATE_GOLDEN_DIR "/corpus.jsonl.gz", "rb");
  if (file == nullptr) std::abort();
  std::string text;
  char buffer[1 << 16];
  for (int read = 0; (read = gzread(file, buffer, sizeof buffer)) > 0;)
    text.append(buffer, static_cast<std::size_t>(read));
  gzclose(file);
  std::vector<std::string> documents;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    auto line = nlohmann::json::parse(text.substr(start, end - start));
    if (line["kind"] == kind) documents.push_back(line["text"].get<std::string>());
  }
  return documents;
}

// Throughput is the encoder's own: the segment cache (which would serve
// every repeated document from memory) is off. The long-word tables are
// built here, as the gateway builds them when it loads a model, so that the
// first benchmark to meet a long word does not time their construction.
const Tokenizer& shared_tokenizer() {
  static const Tokenizer tokenizer = [] {
    Tokenizer loaded = Tokenizer::load_folder(tokenizer_folder(), {.segment_cache_bytes = 0});
    loaded.prepare_long_words();
    return loaded;
  }();
  return tokenizer;
}

// Long words by the pair-by-pair merge only: the baseline of the
// backtracking encoder, in the same run.
const Tokenizer& merging_tokenizer() {
  static const Tokenizer tokenizer =
      Tokenizer::load_folder(tokenizer_folder(), {.segment_cache_bytes = 0, .backtracking_encoder = false});
  return tokenizer;
}

// A gateway thread keeps its workspace, so the steady state has a warm word
// cache; `fresh_workspace` measures the first request of a new thread.
void encode(benchmark::State& state, const std::string& kind, bool fresh_workspace) {
  const Tokenizer& tokenizer = shared_tokenizer();
  auto documents = corpus_documents(kind);
  std::size_t bytes = 0;
  for (const auto& document : documents) bytes += document.size();
  auto workspace = std::make_unique<EncodeWorkspace>();
  std::vector<TokenId> ids;
  std::size_t tokens = 0;
  for (auto _ : state) {
    if (fresh_workspace) {
      state.PauseTiming();
      workspace = std::make_unique<EncodeWorkspace>();
      state.ResumeTiming();
    }
    tokens = 0;
    for (const auto& document : documents) {
      ids.clear();
      if (!tokenizer.encode(document, false, *workspace, ids)) std::abort();
      tokens += ids.size();
    }
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["corpus_bytes"] = static_cast<double>(bytes);
  state.counters["tokens"] = static_cast<double>(tokens);
}

void encode_prose(benchmark::State& state) {
  encode(state, "prose", false);
}
void encode_code(benchmark::State& state) {
  encode(state, "code", false);
}
void encode_prose_cold(benchmark::State& state) {
  encode(state, "prose", true);
}
void encode_code_cold(benchmark::State& state) {
  encode(state, "code", true);
}
BENCHMARK(encode_prose)->Unit(benchmark::kMillisecond);
BENCHMARK(encode_code)->Unit(benchmark::kMillisecond);
BENCHMARK(encode_prose_cold)->Unit(benchmark::kMillisecond);
BENCHMARK(encode_code_cold)->Unit(benchmark::kMillisecond);

void encode_adversarial(benchmark::State& state, const std::string& kind, bool backtracking) {
  const Tokenizer& tokenizer = backtracking ? shared_tokenizer() : merging_tokenizer();
  const auto text = kvgate::bench::adversarial_text(kind);
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  // Once before timing: the first long word builds the backtracking tables.
  if (!tokenizer.encode(std::string(100, 'q'), false, workspace, ids)) std::abort();
  for (auto _ : state) {
    ids.clear();
    if (!tokenizer.encode(text, false, workspace, ids)) std::abort();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK_CAPTURE(encode_adversarial, long_words, std::string("long_words"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, whitespace, std::string("whitespace"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, base64, std::string("base64"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, json, std::string("json"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, cjk, std::string("cjk"), true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, long_words_merge, std::string("long_words"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, whitespace_merge, std::string("whitespace"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, base64_merge, std::string("base64"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, json_merge, std::string("json"), false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(encode_adversarial, cjk_merge, std::string("cjk"), false)->Unit(benchmark::kMillisecond);

// What the first long word after a load costs: the backtracking encoder's
// tables are built then (once per tokenizer), not at load.
void first_long_word(benchmark::State& state) {
  const std::string word(100, 'q');
  for (auto _ : state) {
    state.PauseTiming();
    auto tokenizer =
        std::make_unique<Tokenizer>(Tokenizer::load_folder(tokenizer_folder(), {.segment_cache_bytes = 0}));
    EncodeWorkspace workspace;
    std::vector<TokenId> ids;
    state.ResumeTiming();
    if (!tokenizer->encode(word, false, workspace, ids)) std::abort();
    benchmark::DoNotOptimize(ids.data());
    state.PauseTiming();
    tokenizer.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(first_long_word)->Unit(benchmark::kMillisecond)->Iterations(3);

std::size_t file_size(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  return static_cast<std::size_t>(file.tellg());
}

// Load time, and the loaded tokenizer's own memory against the file's size.
void load(benchmark::State& state) {
  std::size_t resident_growth = 0;
  std::size_t accounted = 0;
  for (auto _ : state) {
    std::size_t before = kvgate::bench::resident_bytes();
    Tokenizer tokenizer = Tokenizer::load_folder(tokenizer_folder());
    resident_growth = kvgate::bench::resident_bytes() - before;
    accounted = tokenizer.memory_bytes();
    benchmark::DoNotOptimize(accounted);
  }
  double file = static_cast<double>(file_size(tokenizer_folder() + "/tokenizer.json"));
  state.counters["file_MiB"] = file / (1 << 20);
  state.counters["tables_MiB"] = static_cast<double>(accounted) / (1 << 20);
  state.counters["tables_per_file_byte"] = static_cast<double>(accounted) / file;
  state.counters["rss_growth_MiB"] = static_cast<double>(resident_growth) / (1 << 20);
}
BENCHMARK(load)->Unit(benchmark::kMillisecond)->Iterations(3);

// A long agent-style conversation: a system prompt and alternating turns cut
// from the corpus' prose, about `target_tokens` in all.
nlohmann::ordered_json long_conversation(const Tokenizer& tokenizer, std::size_t target_tokens) {
  auto prose = corpus_documents("prose");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "system"}, {"content", prose[0]}});
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  std::size_t tokens = 0;
  for (std::size_t index = 1; tokens < target_tokens; ++index) {
    const std::string& text = prose[index % prose.size()];
    ids.clear();
    if (!tokenizer.encode(text, false, workspace, ids)) std::abort();
    tokens += ids.size();
    messages.push_back({{"role", index % 2 ? "user" : "assistant"}, {"content", text}});
  }
  if (messages.back()["role"] == "user") messages.erase(messages.size() - 1);
  return messages;
}

// The next turn of a ~32k-token conversation whose earlier turns the
// gateway has seen: prepare the request, render the chat template, encode.
// Each iteration's new question is new text; everything before it is found
// in the segment cache and the render cache (or not, with the caches off).
// Arg: the conversation's size in tokens (thousands).
enum class Caches { kNone, kSegments, kSegmentsAndRender };
// `short_messages`: Arg is instead the number of earlier messages, each a
// few words (what the render cache's thresholds for keeping an iteration
// are weighed on).
void chat_next_turn(benchmark::State& state, Caches caches, bool short_messages = false) {
  auto tokenizer =
      Tokenizer::load_folder(tokenizer_folder(), {.segment_cache_bytes = caches != Caches::kNone ? 256u << 20 : 0});
  const auto source = kvgate::prompt::read_chat_template(tokenizer_folder(), tokenizer.config());
  if (!source || !*source) {
    state.SkipWithError(source ? "the tokenizer folder has no chat template" : source.error().c_str());
    return;
  }
  auto compiled = kvgate::chat_template::ChatTemplate::compile(**source);
  if (!compiled) std::abort();
  auto special = kvgate::prompt::special_tokens_from_config(tokenizer.config());
  // Shared, as the gateway's parsed body is (the prepared messages' strings
  // stay in it) in the mode with every cache; copied as before otherwise.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (short_messages) {
    for (std::int64_t index = 0; index < state.range(0); ++index) {
      messages.push_back({{"role", index % 2 != 0 ? "assistant" : "user"},
                          {"content", "short message number " + std::to_string(index)}});
    }
  } else {
    messages = long_conversation(tokenizer, static_cast<std::size_t>(state.range(0)) * 1000);
  }
  auto shared_body =
      std::make_shared<nlohmann::ordered_json>(nlohmann::ordered_json{{"model", "m"}, {"messages", messages}});
  auto& body = *shared_body;
  body["messages"].push_back({{"role", "user"}, {"content", "warm-up question"}});
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  kvgate::chat_template::RenderCache render_cache;
  const bool latest = caches == Caches::kSegmentsAndRender;
  auto run = [&] {
    auto input = kvgate::prompt::render_input_from_request(body, *compiled, special,
                                                           latest ? shared_body : std::shared_ptr<const void>());
    input->cache = latest ? &render_cache : nullptr;
    auto prompt = compiled->render(*input);
    ids.clear();
    if (!prompt || !tokenizer.encode(*prompt, false, workspace, ids, true)) std::abort();  // trusted: as exact_tokens
  };
  run();  // the earlier turns, seen before
  std::uint64_t question = 0;
  for (auto _ : state) {
    state.PauseTiming();
    body["messages"].back()["content"] = "And what about case " + std::to_string(++question) + "?";
    state.ResumeTiming();
    run();
  }
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
  state.counters["messages"] = static_cast<double>(body["messages"].size());
  if (latest) {  // per turn
    state.counters["replayed"] =
        benchmark::Counter(static_cast<double>(render_cache.replayed_iterations()), benchmark::Counter::kAvgIterations);
    state.counters["evaluated"] = benchmark::Counter(static_cast<double>(render_cache.evaluated_iterations()),
                                                     benchmark::Counter::kAvgIterations);
  }
}
// The stages of a turn, each alone on the same input: parsing the body (the
// gateway's JSON document), preparing the request (vLLM's preparation),
// rendering the template, encoding the prompt (segment cache warm). Arg: the
// chat's size in thousands of tokens (32: ~32k; 128: ~128k, about 500 kB of
// JSON); 0: one short user message (the proxy benchmark's request).
enum class Stage {
  kParse,
  kParseNlohmann,
  kPrepare,
  kPrepareShared,
  kRender,
  kRenderRepeated,
  kRenderIncremental,
  kRenderIncrementalNewText,
  kEncode,
  kRequest,
  kRequestUncached
};
void chat_stage(benchmark::State& state, Stage stage) {
  auto tokenizer = Tokenizer::load_folder(tokenizer_folder());
  const auto source = kvgate::prompt::read_chat_template(tokenizer_folder(), tokenizer.config());
  if (!source || !*source) {
    state.SkipWithError(source ? "the tokenizer folder has no chat template" : source.error().c_str());
    return;
  }
  auto compiled = kvgate::chat_template::ChatTemplate::compile(**source);
  if (!compiled) std::abort();
  auto special = kvgate::prompt::special_tokens_from_config(tokenizer.config());
  nlohmann::ordered_json body = {{"model", "m"}};
  body["messages"] = state.range(0) != 0 ? long_conversation(tokenizer, static_cast<std::size_t>(state.range(0)) * 1000)
                                         : nlohmann::ordered_json::array();
  body["messages"].push_back({{"role", "user"}, {"content", "Say hello to the benchmark"}});
  auto input = kvgate::prompt::render_input_from_request(body, *compiled, special);
  auto prompt = compiled->render(*input);
  kvgate::chat_template::RenderCache render_cache;
  auto incremental_input = *input;
  incremental_input.cache = &render_cache;
  if (!compiled->render(incremental_input)) std::abort();  // the earlier turns, seen before
  EncodeWorkspace workspace;
  std::vector<TokenId> ids;
  if (!prompt || !tokenizer.encode(*prompt, false, workspace, ids, true)) std::abort();  // trusted: as exact_tokens
  const std::string text = body.dump();
  auto shared_body = std::make_shared<const nlohmann::ordered_json>(body);
  std::uint64_t requests = 0;
  for (auto _ : state) {
    if (stage == Stage::kParse) {
      benchmark::DoNotOptimize(kvgate::jsonio::parse_ordered(text));
    } else if (stage == Stage::kParseNlohmann) {  // the parser the gateway used before jsonio
      benchmark::DoNotOptimize(nlohmann::ordered_json::parse(text, nullptr, false));
    } else if (stage == Stage::kPrepare) {
      benchmark::DoNotOptimize(kvgate::prompt::render_input_from_request(body, *compiled, special));
    } else if (stage == Stage::kPrepareShared) {  // the strings stay in the body, as the gateway prepares
      benchmark::DoNotOptimize(kvgate::prompt::render_input_from_request(body, *compiled, special, shared_body));
    } else if (stage == Stage::kRequest || stage == Stage::kRequestUncached) {
      // What the gateway's exact path does with one request, without the
      // pauses the stages above need: parse its body (its last message new
      // each time), prepare it, render it (with this thread's render cache,
      // or without one), encode the prompt.
      const std::string marker = "Say hello to the benchmark";
      const std::size_t at = text.rfind(marker);
      std::string request =
          text.substr(0, at) + "Say hello to request " + std::to_string(++requests) + text.substr(at + marker.size());
      auto fresh_body = std::make_shared<nlohmann::ordered_json>(*kvgate::jsonio::parse_ordered(request));
      auto fresh = kvgate::prompt::render_input_from_request(*fresh_body, *compiled, special, fresh_body);
      fresh->cache = stage == Stage::kRequest ? &render_cache : nullptr;
      auto rendered = compiled->render(*fresh);
      ids.clear();
      if (!rendered || !tokenizer.encode(*rendered, false, workspace, ids, true)) std::abort();
    } else if (stage == Stage::kRenderRepeated) {
      // The render alone, without the pause around each iteration that
      // chat_render needs (pausing costs about as much as rendering a
      // small chat on this machine): the same prepared input every time.
      benchmark::DoNotOptimize(compiled->render(*input));
    } else if (stage == Stage::kRender || stage == Stage::kRenderIncremental ||
               stage == Stage::kRenderIncrementalNewText) {
      // A new request each time, as the gateway renders one: its own parsed
      // body and prepared input (strings shared from the body); for the
      // incremental render every message was seen, in the same state,
      // before, except with new text, where the last message is new each
      // time (what recording costs when nothing is replayed).
      state.PauseTiming();
      auto fresh_body = std::make_shared<nlohmann::ordered_json>(*kvgate::jsonio::parse_ordered(text));
      if (stage == Stage::kRenderIncrementalNewText) {
        (*fresh_body)["messages"].back()["content"] = "Say hello to request " + std::to_string(++requests);
      }
      auto fresh = kvgate::prompt::render_input_from_request(*fresh_body, *compiled, special, fresh_body);
      fresh->cache = stage == Stage::kRender ? nullptr : &render_cache;
      state.ResumeTiming();
      benchmark::DoNotOptimize(compiled->render(*fresh));
    } else {
      ids.clear();
      if (!tokenizer.encode(*prompt, false, workspace, ids, true)) std::abort();
    }
  }
  state.counters["prompt_tokens"] = static_cast<double>(ids.size());
  state.counters["body_kB"] = static_cast<double>(text.size()) / 1e3;
  if (stage == Stage::kRenderIncremental || stage == Stage::kRenderIncrementalNewText ||
      stage == Stage::kRequest) {  // per render
    state.counters["replayed"] =
        benchmark::Counter(static_cast<double>(render_cache.replayed_iterations()), benchmark::Counter::kAvgIterations);
    state.counters["evaluated"] = benchmark::Counter(static_cast<double>(render_cache.evaluated_iterations()),
                                                     benchmark::Counter::kAvgIterations);
    state.counters["memo_kB"] = static_cast<double>(render_cache.bytes()) / 1e3;
  }
}
void chat_parse(benchmark::State& state) {
  chat_stage(state, Stage::kParse);
}
void chat_parse_nlohmann(benchmark::State& state) {
  chat_stage(state, Stage::kParseNlohmann);
}
void chat_prepare(benchmark::State& state) {
  chat_stage(state, Stage::kPrepare);
}
void chat_prepare_shared(benchmark::State& state) {
  chat_stage(state, Stage::kPrepareShared);
}
void chat_render(benchmark::State& state) {
  chat_stage(state, Stage::kRender);
}
void chat_render_repeated(benchmark::State& state) {
  chat_stage(state, Stage::kRenderRepeated);
}
void chat_render_incremental(benchmark::State& state) {
  chat_stage(state, Stage::kRenderIncremental);
}
void chat_render_incremental_new_text(benchmark::State& state) {
  chat_stage(state, Stage::kRenderIncrementalNewText);
}
void chat_encode(benchmark::State& state) {
  chat_stage(state, Stage::kEncode);
}
void chat_request(benchmark::State& state) {
  chat_stage(state, Stage::kRequest);
}
void chat_request_uncached(benchmark::State& state) {
  chat_stage(state, Stage::kRequestUncached);
}
BENCHMARK(chat_parse)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_parse_nlohmann)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_prepare)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_prepare_shared)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_render)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_render_repeated)->Arg(32)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_render_incremental)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_render_incremental_new_text)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_encode)->Arg(32)->Arg(128)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_request)->Arg(32)->Arg(0)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_request_uncached)->Arg(32)->Arg(0)->Unit(benchmark::kMicrosecond);

void chat_next_turn_cached(benchmark::State& state) {
  chat_next_turn(state, Caches::kSegmentsAndRender);
}
void chat_next_turn_segments_only(benchmark::State& state) {  // before incremental rendering
  chat_next_turn(state, Caches::kSegments);
}
void chat_next_turn_uncached(benchmark::State& state) {
  chat_next_turn(state, Caches::kNone);
}
void chat_next_turn_short_cached(benchmark::State& state) {
  chat_next_turn(state, Caches::kSegmentsAndRender, true);
}
void chat_next_turn_short_uncached(benchmark::State& state) {  // the segment cache only
  chat_next_turn(state, Caches::kSegments, true);
}
BENCHMARK(chat_next_turn_short_cached)->Arg(40)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_next_turn_short_uncached)->Arg(40)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_next_turn_cached)->Arg(32)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_next_turn_segments_only)->Arg(32)->Arg(128)->Unit(benchmark::kMicrosecond);
BENCHMARK(chat_next_turn_uncached)->Arg(32)->Arg(128)->Unit(benchmark::kMicrosecond);

// The adversarial kinds as `kvgate tokenize` input: ten draws of each kind,
// cut into JSON lines of at most 64k characters (bench/tokenizer/tokenize_command.sh).
void print_adversarial_lines() {
  constexpr std::size_t kLine = 64 * 1024;
  for (const char* kind : {"long_words", "whitespace", "base64", "json", "cjk"}) {
    for (std::uint64_t seed = 0; seed < 10; ++seed) {
      const std::string text = kvgate::bench::adversarial_text(kind, seed);
      for (std::size_t start = 0; start < text.size();) {
        std::size_t end = std::min(text.size(), start + kLine);
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
          --end;  // whole characters only
        }
        std::cout << nlohmann::json{{"text", text.substr(start, end - start)}}.dump() << '\n';
        start = end;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--adversarial-jsonl") {
    print_adversarial_lines();
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
