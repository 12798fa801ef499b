// Incremental rendering: a render with a RenderCache gives the output (or the
// error) of a render without one, whatever earlier renders left in the
// cache. Each case renders a sequence of inputs, both ways, and compares; the
// templates are built to break a memo that misses a dependency (state carried
// between iterations and between renders, tests whose inputs move, the clock,
// macros, aliases, shadowed built-ins, limits).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kvgate/chat_template/chat_template.hpp"

namespace kvgate::chat_template {
namespace {

using json = nlohmann::ordered_json;

struct Render {
  json variables;  // "messages" and any other variables
  int hour = 12;   // the clock strftime_now reads
  std::size_t output_limit = 0;
  std::uint64_t step_limit = 0;
};

RenderInput input_for(const Render& render) {
  RenderInput input;
  input.messages = Value::from_json(render.variables.value("messages", json::array()));
  for (const auto& [key, value] : render.variables.items()) {
    if (key != "messages") input.extra.emplace_back(key, Value::from_json(value));
  }
  input.now.tm_year = 2026 - 1900;
  input.now.tm_mday = 1;
  input.now.tm_hour = render.hour;
  input.output_limit = render.output_limit;
  input.step_limit = render.step_limit;
  return input;
}

// Renders each input with and without `cache` and requires the same result;
// returns the cached renders' outputs (errors as "error: ...").
std::vector<std::string> same_with_cache(std::string_view source, const std::vector<Render>& renders,
                                         RenderCache& cache) {
  auto compiled = ChatTemplate::compile(source);
  EXPECT_TRUE(compiled.has_value()) << compiled.error();
  std::vector<std::string> outputs;
  if (!compiled) return outputs;
  for (std::size_t index = 0; index < renders.size(); ++index) {
    RenderInput input = input_for(renders[index]);
    auto full = compiled->render(input);
    input.cache = &cache;
    auto incremental = compiled->render(input);
    EXPECT_EQ(full.has_value(), incremental.has_value()) << "render " << index << ": " << (full ? *full : full.error())
                                                         << " / " << (incremental ? *incremental : incremental.error());
    if (full && incremental) {
      EXPECT_EQ(*incremental, *full) << "render " << index;
      outputs.push_back(*incremental);
    } else if (!full && !incremental) {
      EXPECT_EQ(incremental.error(), full.error()) << "render " << index;
      outputs.push_back("error: " + incremental.error());
    }
  }
  return outputs;
}

// Every iteration kept, however short, so that every replay is checked.
constexpr std::size_t kKeepAll = 0;

std::vector<std::string> same_with_cache(std::string_view source, const std::vector<Render>& renders) {
  RenderCache cache(RenderCache::kDefaultCapacityBytes, kKeepAll, kKeepAll);
  return same_with_cache(source, renders, cache);
}

json messages(const std::vector<json>& items) {
  json list = json::array();
  for (const auto& item : items) list.push_back(item);
  return json{{"messages", list}};
}

TEST(RenderCache, ReplaysTheIterationsOfEarlierTurns) {
  const char* source = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% endfor %}";
  json user = {{"role", "user"}, {"content", " hello "}};
  json assistant = {{"role", "assistant"}, {"content", "hi"}};
  json next = {{"role", "user"}, {"content", "more"}};
  RenderCache cache(RenderCache::kDefaultCapacityBytes, kKeepAll, kKeepAll);
  auto outputs = same_with_cache(source, {{messages({user})}, {messages({user, assistant, next})}}, cache);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[1], "<user>hello<assistant>hi<user>more");
  // The first message of the second render was replayed (the uncached
  // renders do not touch the cache).
  EXPECT_EQ(cache.replayed_iterations(), 1u);
  EXPECT_EQ(cache.evaluated_iterations(), 3u);
  EXPECT_GT(cache.bytes(), 0u);
}

TEST(RenderCache, NamespaceStateCarriedThroughIterationsIsADependency) {
  const char* source =
      "{% set ns = namespace(total=0) %}{% for m in messages %}{% set ns.total = ns.total + m.n %}"
      "{{ ns.total }},{% endfor %}={{ ns.total }}";
  json a = {{"n", 1}};
  json b = {{"n", 2}};
  auto outputs = same_with_cache(source, {{messages({a, b, a})},
                                          {messages({a, b, a, b})},
                                          {messages({b, b, a, b})},  // an earlier item changed: later totals move
                                          {messages({a, b, a, b})}});
  EXPECT_EQ(outputs[1], "1,3,4,6,=6");
  EXPECT_EQ(outputs[2], "2,4,5,7,=7");
}

TEST(RenderCache, TestsRememberedByOutcomeAreEvaluatedAgain) {
  // Qwen3's pattern: a test against state computed over the whole list.
  const char* source =
      "{% set ns = namespace(last=messages|length - 1) %}{% for m in messages %}"
      "{% if loop.index0 > ns.last - 2 %}[{{ m.t }}]{% else %}{{ m.t }}{% endif %}{% endfor %}";
  std::vector<Render> renders;
  json list = json::array();
  for (int turn = 0; turn < 6; ++turn) {
    list.push_back({{"t", std::string(1, static_cast<char>('a' + turn))}});
    renders.push_back({json{{"messages", list}}});
  }
  auto outputs = same_with_cache(source, renders);
  EXPECT_EQ(outputs.back(), "abcd[e][f]");
}

TEST(RenderCache, LoopPositionAndLengthAreDependencies) {
  const char* source =
      "{% for m in messages %}{{ m }}{% if loop.last %}!{% endif %}{{ loop.revindex }}{{ loop.length }}"
      "{% if loop.previtem is defined %}<{{ loop.previtem }}{% endif %}{% endfor %}";
  auto outputs = same_with_cache(source, {{messages({"x", "y"})}, {messages({"x", "y", "z"})}, {messages({"y", "x"})}});
  EXPECT_EQ(outputs[1], "x33y23<xz!13<y");
}

TEST(RenderCache, VariablesSetInEarlierIterationsCarryOver) {
  // A plain set inside the loop stays in the loop's scope for later
  // iterations: both a dependency and an effect.
  const char* source =
      "{% for m in messages %}{% if m == 'mark' %}{% set seen = loop.index %}{% endif %}"
      "{{ m }}{{ seen }};{% endfor %}";
  auto outputs = same_with_cache(
      source, {{messages({"a", "mark", "b"})}, {messages({"a", "b", "b"})}, {messages({"a", "mark", "b", "c"})}});
  EXPECT_EQ(outputs[1], "a;b;b;");
  EXPECT_EQ(outputs[2], "a;mark2;b2;c2;");
}

TEST(RenderCache, TheClockIsNotReplayed) {
  const char* source = "{% for m in messages %}{{ m }}{{ strftime_now('%H') }}{% endfor %}";
  auto outputs = same_with_cache(source, {{messages({"a"}), 9}, {messages({"a"}), 17}});
  EXPECT_EQ(outputs[1], "a17");
}

TEST(RenderCache, MacrosAndTheStateTheyReadAreNotReplayedStale) {
  const char* source =
      "{% macro show(x) %}{{ x }}{{ ns.v }}{% endmacro %}{% set ns = namespace(v=suffix) %}"
      "{% for m in messages %}{{ show(m) }}{% endfor %}";
  auto outputs = same_with_cache(
      source, {{{{"messages", {"a", "b"}}, {"suffix", "1"}}}, {{{"messages", {"a", "b"}}, {"suffix", "2"}}}});
  EXPECT_EQ(outputs[1], "a2b2");
  // Within one render the macro is the same object: its body's reads (here
  // the caller's `loop`) are not tracked, so such iterations are not kept.
  auto repeated = same_with_cache(
      "{% macro show(x) %}{{ x }}{{ loop.index }}{% endmacro %}"
      "{% for m in messages %}{{ show(m) }}{% endfor %}",
      {{messages({"a", "a"})}});
  EXPECT_EQ(repeated[0], "a1a2");
}

TEST(RenderCache, ChangingAliasesOfANamespaceAreTold) {
  // In one render `b` is `a`, in the other a namespace of its own: the same
  // writes and reads give different outputs.
  const char* source =
      "{% set a = namespace(x=0) %}{% if alias %}{% set b = a %}{% else %}{% set b = namespace(x=0) %}{% endif %}"
      "{% for m in messages %}{% set b.x = b.x + 1 %}{{ a.x }}{{ b.x }};{% endfor %}";
  auto outputs = same_with_cache(source, {{{{"messages", {"m", "n"}}, {"alias", true}}},
                                          {{{"messages", {"m", "n"}}, {"alias", false}}},
                                          {{{"messages", {"m", "n"}}, {"alias", true}}}});
  EXPECT_EQ(outputs[0], "11;22;");
  EXPECT_EQ(outputs[1], "01;02;");
}

TEST(RenderCache, ShadowedBuiltinsAreDependencies) {
  const char* source = "{% for m in messages %}{% if true %}{{ m }}{% endif %}{{ range(2) | length }}{% endfor %}";
  auto outputs = same_with_cache(source, {{{{"messages", {"a"}}}}, {{{"messages", {"a"}}, {"true", false}}}});
  EXPECT_EQ(outputs[0], "a2");
  EXPECT_EQ(outputs[1], "2");
}

TEST(RenderCache, ValuesAreComparedForRendering) {
  // 1 and 1.0 are equal to Jinja but print differently.
  const char* source = "{% for m in messages %}{{ m.n }},{% endfor %}";
  auto outputs = same_with_cache(
      source,
      {{messages({{{"n", 1}}})}, {messages({{{"n", 1.0}}})}, {messages({{{"n", "1"}}})}, {messages({{{"n", true}}})}});
  EXPECT_EQ(outputs[0], "1,");
  EXPECT_EQ(outputs[1], "1.0,");
  EXPECT_EQ(outputs[3], "true,");
}

TEST(RenderCache, BreakContinueAndNestedLoops) {
  const char* source =
      "{% for m in messages %}{% if m.stop %}{% break %}{% endif %}{% if m.skip %}{% continue %}{% endif %}"
      "{% for part in m.parts %}{{ loop.index }}{{ part }}{% endfor %};{% else %}none{% endfor %}";
  json one = {{"parts", {"a", "b"}}};
  json skip = {{"skip", true}, {"parts", {"z"}}};
  json stop = {{"stop", true}};
  auto outputs = same_with_cache(
      source,
      {{messages({skip, one})}, {messages({skip, one, stop, one})}, {messages({skip})}, {messages({skip, one, one})}});
  EXPECT_EQ(outputs[1], "1a2b;");
  EXPECT_EQ(outputs[2], "none");
  EXPECT_EQ(outputs[3], "1a2b;1a2b;");
}

TEST(RenderCache, LimitsFailAsTheFullRenderFails) {
  const char* source = "{% for m in messages %}{{ m }}{% set x = m ~ m %}{% endfor %}";
  std::string long_text(100, 'x');
  json list = {{"messages", {long_text, long_text, long_text}}};
  std::vector<Render> renders = {{list}, {list, 12, 250}, {list, 12, 0, 5}, {list, 12, 0, 40}, {list}};
  auto outputs = same_with_cache(source, renders);
  ASSERT_EQ(outputs.size(), renders.size());
  EXPECT_EQ(outputs[1], "error: rendered prompt exceeds 250 bytes");
  EXPECT_NE(outputs[2].find("steps"), std::string::npos);
}

TEST(RenderCache, MemberReadsCountTheStepsOfTheFullRender) {
  // Recording reads `m.role` and `m['content']` without evaluating `m` and
  // the key; the steps must still be counted, or a replayed (or recorded)
  // iteration would pass under a step limit that fails the full render.
  const char* source = "{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}";
  json first = {{"role", "user"}, {"content", "a"}};
  json second = {{"role", "assistant"}, {"content", "b"}};
  json third = {{"role", "user"}, {"content", "c"}};
  json turn1 = messages({first, second});
  json turn2 = messages({first, second, third});
  for (std::uint64_t limit = 1; limit <= 40; ++limit) {
    SCOPED_TRACE(limit);
    auto outputs = same_with_cache(source, {{turn1, 12, 0, limit}, {turn2, 12, 0, limit}});
    ASSERT_EQ(outputs.size(), 2u);
  }
}

TEST(RenderCache, IterationsThatReadTheWholeListAreEvaluated) {
  // Qwen3's backwards scan: each iteration reads the conversation's length,
  // so none is recorded, and after a few the loop is not looked up again.
  const char* source =
      "{% set ns = namespace(last=-1) %}{% for m in messages[::-1] %}{% set index = messages|length - 1 - loop.index0 "
      "%}"
      "{% if ns.last < 0 and m == 'q' %}{% set ns.last = index %}{% endif %}{% endfor %}"
      "{% for m in messages %}{% if loop.index0 == ns.last %}>{% endif %}{{ m }}{% endfor %}";
  std::vector<Render> renders;
  json list = json::array();
  for (int turn = 0; turn < 40; ++turn) {
    list.push_back(turn % 7 == 3 ? "q" : std::to_string(turn));
    renders.push_back({json{{"messages", list}}});
  }
  RenderCache cache(RenderCache::kDefaultCapacityBytes, kKeepAll, kKeepAll);
  auto outputs = same_with_cache(source, renders, cache);
  ASSERT_EQ(outputs.size(), renders.size());
  EXPECT_TRUE(outputs.back().ends_with("37>q39")) << outputs.back();
  EXPECT_GT(cache.replayed_iterations(), 0u);
}

TEST(RenderCache, ATestThatNowCallsAMacroCannotEvictTheRecordItValidates) {
  // Recorded while ns.on was false (the macro not called); validated with it
  // true, the test calls the macro, whose loop runs while the record is
  // being checked. A small cache: anything that loop stored would evict it.
  const char* source =
      "{% macro inner() %}{% for x in range(100) %}{{ x }}{% endfor %}{% endmacro %}"
      "{% set ns = namespace(on=on) %}{% for m in messages %}{% if ns.on and inner() %}+{% endif %}{{ m }}"
      "{% endfor %}";
  RenderCache cache(4096, kKeepAll, kKeepAll);
  auto outputs = same_with_cache(
      source, {{{{"messages", {"a", "b"}}, {"on", false}}}, {{{"messages", {"a", "b"}}, {"on", true}}}}, cache);
  EXPECT_EQ(outputs[1], "+a+b");
}

TEST(RenderCache, ShortIterationsAreNotKeptByDefault) {
  // Replaying a short message costs about what evaluating it does; a long
  // one is kept.
  const char* source = "{% for m in messages %}<{{ m }}>{% endfor %}";
  RenderCache cache;
  same_with_cache(source, {{messages({"hi"})}, {messages({"hi"})}}, cache);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.replayed_iterations(), 0u);
  std::string long_text(RenderCache::kDefaultMinOutputBytes, 'x');
  same_with_cache(source, {{messages({long_text})}, {messages({long_text, "hi"})}}, cache);
  EXPECT_GT(cache.bytes(), 0u);
  EXPECT_EQ(cache.replayed_iterations(), 1u);
}

TEST(RenderCache, ShortItemsAreRecordedWhereTheirIterationsTakeManySteps) {
  // Short items are evaluated without recording until an iteration over one
  // turns out worth keeping (here by its steps): from the next render on,
  // that loop records them, and the render after replays them.
  const char* source =
      "{% for m in messages %}{% for i in range(100) %}{% if i == 39 %}<{{ m }}>{% endif %}{% endfor %}{% endfor %}";
  RenderCache cache;
  auto outputs =
      same_with_cache(source, {{messages({"a"})}, {messages({"a", "b"})}, {messages({"a", "b", "c"})}}, cache);
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(outputs[2], "<a><b><c>");
  EXPECT_EQ(cache.replayed_iterations(), 2u);  // a and b in the third render
  EXPECT_GT(cache.bytes(), 0u);
  // Short items of a cheap loop in the same cache stay unrecorded.
  same_with_cache("{% for m in messages %}<{{ m }}>{% endfor %}", {{messages({"a"})}, {messages({"a", "b"})}}, cache);
  EXPECT_EQ(cache.replayed_iterations(), 2u);
}

TEST(RenderCache, TemplatesShareACacheWithoutMixingTheirEntries) {
  RenderCache cache(RenderCache::kDefaultCapacityBytes, kKeepAll, kKeepAll);
  auto first = same_with_cache("{% for m in messages %}A{{ m }}{% endfor %}", {{messages({"x"})}}, cache);
  auto second = same_with_cache("{% for m in messages %}B{{ m }}{% endfor %}", {{messages({"x"})}}, cache);
  EXPECT_EQ(first[0], "Ax");
  EXPECT_EQ(second[0], "Bx");
}

TEST(RenderCache, TheBudgetBoundsWhatIsKept) {
  RenderCache cache(64 << 10, kKeepAll, kKeepAll);
  std::vector<Render> renders;
  for (int index = 0; index < 50; ++index) {
    renders.push_back({messages({std::string(4000, static_cast<char>('a' + index % 26)) + std::to_string(index)})});
  }
  same_with_cache("{% for m in messages %}{{ m }}{% endfor %}", renders, cache);
  EXPECT_LE(cache.bytes(), 64u << 10);
  EXPECT_GT(cache.bytes(), 0u);
}

}  // namespace
}  // namespace kvgate::chat_template
