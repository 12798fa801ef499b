// The chat-template interpreter's pieces: each case renders a small
// template and checks the exact output (Jinja2 semantics as the reference
// implements them), or the error it reports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kvgate/chat_template/chat_template.hpp"

namespace kvgate::chat_template {
namespace {

using json = nlohmann::ordered_json;

Result<std::string, std::string> render(std::string_view source, const json& variables = json::object()) {
  auto compiled = ChatTemplate::compile(source);
  if (!compiled) return unexpected("compile: " + compiled.error());
  RenderInput input;
  input.messages = Value::from_json(variables.value("messages", json::array()));
  for (const auto& [key, value] : variables.items()) {
    if (key != "messages") input.extra.emplace_back(key, Value::from_json(value));
  }
  input.now.tm_year = 2026 - 1900;
  input.now.tm_mon = 10;
  input.now.tm_mday = 30;
  return compiled->render(input);
}

std::string ok(std::string_view source, const json& variables = json::object()) {
  auto rendered = render(source, variables);
  EXPECT_TRUE(rendered.has_value()) << source << ": " << rendered.error();
  return rendered ? *rendered : "";
}

TEST(ChatTemplate, WhitespaceControlTrimBlocksAndLstripBlocks) {
  EXPECT_EQ(ok("a  {{- 'b' -}}  c"), "abc");
  // trim_blocks drops the newline after a block tag; lstrip_blocks the
  // indentation before one; the final newline of the template goes too.
  EXPECT_EQ(ok("{% if true %}\n    x\n    {% endif %}\ny\n"), "    x\ny");
  EXPECT_EQ(ok("{# a comment #}\nz"), "z");
}

TEST(ChatTemplate, LoopsExposeLoopVariablesBreakContinueAndElse) {
  json variables = {{"items", {"a", "b", "c", "d"}}};
  EXPECT_EQ(ok("{% for x in items %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}", variables),
            "1a,2b,3c,4d");
  EXPECT_EQ(ok("{% for x in items %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'd' %}{% break %}{% endif %}"
               "{{ x }}{% endfor %}",
               variables),
            "ac");
  EXPECT_EQ(ok("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(ok("{% for x in items if x != 'a' %}{{ x }}{% endfor %}", variables), "bcd");
  EXPECT_EQ(ok("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(ChatTemplate, NamespacesCarryStateOutOfLoops) {
  EXPECT_EQ(ok("{% set ns = namespace(count=0) %}{% for x in [1, 2, 3] %}{% set ns.count = ns.count + x %}"
               "{% endfor %}{{ ns.count }}"),
            "6");
  // A plain set inside a loop does not leak out of it.
  EXPECT_EQ(ok("{% set total = 0 %}{% for x in [1, 2] %}{% set total = x %}{% endfor %}{{ total }}"), "0");
}

TEST(ChatTemplate, MacrosTakePositionalKeywordAndDefaultArguments) {
  EXPECT_EQ(ok("{% macro tag(name, close=false) %}<{{ '/' if close }}{{ name }}>{% endmacro %}"
               "{{ tag('a') }}{{ tag('a', close=true) }}"),
            "<a></a>");
}

TEST(ChatTemplate, FiltersChatTemplatesUse) {
  EXPECT_EQ(ok("{{ x | tojson }}", {{"x", {{"b", 1}, {"a", {true, nullptr, 1.5, "é\n"}}}}}),
            R"({"b": 1, "a": [true, null, 1.5, "é\n"]})");
  EXPECT_EQ(ok("{{ x | tojson(indent=2, sort_keys=true) }}", {{"x", {{"b", 1}, {"a", json::array()}}}}),
            "{\n  \"a\": [],\n  \"b\": 1\n}");
  EXPECT_EQ(ok("{{ '  hi  ' | trim }}|{{ 'abc' | length }}|{{ ['a', 'b'] | join(', ') }}|{{ 'x' | upper }}"),
            "hi|3|a, b|X");
  EXPECT_EQ(ok("{{ undefined_name | default('fallback') }}|{{ '' | default('empty', true) }}"), "fallback|empty");
  json tools = {{"tools", {{{"name", "a"}, {"on", true}}, {{"name", "b"}, {"on", false}}}}};
  EXPECT_EQ(ok("{{ tools | selectattr('on') | map(attribute='name') | join(',') }}", tools), "a");
  EXPECT_EQ(ok("{{ tools | rejectattr('on') | map(attribute='name') | list | tojson }}", tools), R"(["b"])");
  EXPECT_EQ(ok("{{ 'a-b-c' | replace('-', '+') }}"), "a+b+c");
}

TEST(ChatTemplate, TestsAndMembership) {
  json variables = {{"s", "text"}, {"n", nullptr}, {"l", {1, 2}}};
  EXPECT_EQ(ok("{{ s is string }}{{ n is none }}{{ missing is defined }}{{ s is not none }}", variables),
            "truetruefalsetrue");
  EXPECT_EQ(ok("{{ 'ex' in s }}{{ 3 in l }}{{ 'k' in {'k': 1} }}{{ 2 not in l }}", variables), "truefalsetruefalse");
}

TEST(ChatTemplate, StringMethodsFollowPython) {
  EXPECT_EQ(ok(R"({{ '\n\n x \n'.strip('\n') }}|{{ ' x '.lstrip() }}|{{ 'a</think>b'.split('</think>')[-1] }})"),
            " x |x |b");
  EXPECT_EQ(ok("{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('bc') }}{{ 'a b  c'.split() | length }}"),
            "truetrue3");
}

TEST(ChatTemplate, SlicesAndNegativeIndexes) {
  json variables = {{"messages", {{{"role", "system"}}, {{"role", "user"}}, {{"role", "assistant"}}}}};
  EXPECT_EQ(ok("{% for m in messages[1:] %}{{ m.role }} {% endfor %}", variables), "user assistant ");
  EXPECT_EQ(ok("{% for m in messages[::-1] %}{{ m['role'][0] }}{% endfor %}{{ messages[-1].role }}", variables),
            "ausassistant");
  EXPECT_EQ(ok("{{ 'héllo'[1:3] }}"), "él");
}

TEST(ChatTemplate, ErrorsAreValuesWithTheTemplatesMessage) {
  auto raised = render("{{ raise_exception('roles must alternate') }}");
  ASSERT_FALSE(raised.has_value());
  EXPECT_EQ(raised.error(), "roles must alternate");
  auto unknown = render("{{ 'x' | no_such_filter }}");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_NE(unknown.error().find("no_such_filter"), std::string::npos);
  EXPECT_FALSE(render("{{ none + 'x' }}").has_value());
  auto broken = render("{% if %}");
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.error().find("compile:"), std::string::npos);
  EXPECT_FALSE(render("{% for x in y %}").has_value());  // missing endfor
  EXPECT_FALSE(render("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}").has_value());  // too deep
}

// Namespaces are shared by reference: putting one inside itself (directly
// or in a list) is refused as an error, so tojson never recurses for ever
// and the namespace is freed with the render.
TEST(ChatTemplate, ANamespaceCannotBeAssignedIntoItself) {
  auto direct = render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}{{ ns | tojson }}");
  ASSERT_FALSE(direct.has_value());
  EXPECT_NE(direct.error().find("namespace into itself"), std::string::npos);
  EXPECT_FALSE(render("{% set ns = namespace(a=1) %}{% set ns.all = [1, [ns]] %}{{ ns | tojson }}").has_value());
  // Another namespace inside it is fine.
  auto nested = render(
      "{% set inner = namespace(b=2) %}{% set ns = namespace(a=1) %}{% set ns.inner = inner %}"
      "{{ ns | tojson }}");
  ASSERT_TRUE(nested.has_value()) << nested.error();
  EXPECT_EQ(*nested, R"({"a": 1, "inner": {"b": 2}})");
}

TEST(ChatTemplate, TheClockIsAnInput) {
  EXPECT_EQ(ok("{{ strftime_now('%d %b %Y') }}"), "30 Nov 2026");
}

TEST(ChatTemplate, OutputIsBounded) {
  auto compiled = ChatTemplate::compile("{% for x in range(100000) %}xxxxxxxxxx{% endfor %}");
  ASSERT_TRUE(compiled.has_value());
  RenderInput input;
  input.output_limit = 1000;
  auto rendered = compiled->render(input);
  ASSERT_FALSE(rendered.has_value());
  EXPECT_NE(rendered.error().find("exceeds"), std::string::npos);
}

TEST(ChatTemplate, DetectsTemplatesThatLoopOverMessageContent) {
  EXPECT_TRUE(ChatTemplate::compile("{% for m in messages %}{% for p in m['content'] %}{% endfor %}{% endfor %}")
                  ->iterates_content());
  EXPECT_FALSE(ChatTemplate::compile("{% for m in messages %}{{ m.content }}{% endfor %}")->iterates_content());
}

}  // namespace
}  // namespace kvgate::chat_template
