#include "tokenize_command.hpp"

#include <charconv>
#include <ctime>
#include <exception>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "kvgate/app/ordered_lines.hpp"
#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/jsonio/parse.hpp"
#include "kvgate/prompt/chat_request.hpp"
#include "kvgate/prompt/model_tokenizer.hpp"
#include "kvgate/tokenizer/hf_tokenizer.hpp"

namespace kvgate::app {

namespace {

using nlohmann::ordered_json;

constexpr int kExitBadTokenizer = 2;

std::tm local_now() {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return local;
}

// {"error": message}. A message may quote the line (a template's error, a
// tokenizer's), so bytes that are not UTF-8 are replaced rather than make
// the dump throw.
std::string error_line(const std::string& message) {
  return ordered_json{{"error", message}}.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// `{"ids":[...]}` (and the prompt, for chat lines) written by hand: a json
// array of the ids, then its dump, was a tenth of the command's time.
void append_ids(std::string& out, const std::vector<kvgate::TokenId>& ids) {
  out += R"("ids":[)";
  char digits[16];
  for (std::size_t index = 0; index < ids.size(); ++index) {
    if (index > 0) {
      out += ',';
    }
    auto [end, ignored] = std::to_chars(digits, digits + sizeof digits, ids[index]);
    out.append(digits, end);
  }
  out += ']';
}

void encode_text(const tokenizer::Tokenizer& tokenizer, tokenizer::EncodeWorkspace& workspace, const std::string& line,
                 std::vector<kvgate::TokenId>& ids, std::string& out) {
  auto request = jsonio::parse(line);
  if (!request || !request->is_object() || !request->contains("text") || !(*request)["text"].is_string()) {
    out += error_line("each line must be a JSON object with a string \"text\"");
    return;
  }
  ids.clear();
  auto encoded = tokenizer.encode((*request)["text"].get_ref<const std::string&>(), false, workspace, ids);
  if (!encoded) {
    out += error_line(encoded.error());
    return;
  }
  out += '{';
  append_ids(out, ids);
  out += '}';
}

void encode_chat(const tokenizer::Tokenizer& tokenizer, const chat_template::ChatTemplate& chat_template,
                 tokenizer::EncodeWorkspace& workspace, const std::string& line, std::vector<kvgate::TokenId>& ids,
                 std::string& out) {
  auto fail = [&out](const std::string& message) { out += error_line(message); };
  auto request = jsonio::parse_ordered(line);
  if (!request) {
    return fail("the line is not valid JSON");
  }
  auto input = prompt::render_input_from_request(*request, chat_template,
                                                 prompt::special_tokens_from_config(tokenizer.config()));
  if (!input) {
    return fail(input.error());
  }
  input->now = local_now();
  auto prompt = chat_template.render(*input);
  if (!prompt) {
    return fail(prompt.error());
  }
  ids.clear();
  auto encoded = tokenizer.encode(*prompt, false, workspace, ids);
  if (!encoded) {
    return fail(encoded.error());
  }
  out += R"({"prompt":)";
  out += ordered_json(*prompt).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  out += ',';
  append_ids(out, ids);
  out += '}';
}

}  // namespace

int run_tokenize(const std::string& folder, bool chat, unsigned threads, std::istream& input, std::ostream& output,
                 std::ostream& errors) {
  std::optional<tokenizer::Tokenizer> tokenizer;
  std::optional<chat_template::ChatTemplate> chat_template;
  try {
    tokenizer.emplace(tokenizer::Tokenizer::load_folder(folder));
  } catch (const tokenizer::TokenizerLoadError& error) {
    errors << "kvgate tokenize: " << error.what() << '\n';
    return kExitBadTokenizer;
  }
  if (chat) {
    auto source = prompt::read_chat_template(folder, tokenizer->config());
    if (!source) {
      errors << "kvgate tokenize: " << source.error() << '\n';
      return kExitBadTokenizer;
    }
    if (!*source) {
      errors << "kvgate tokenize: " << folder
             << " has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json)\n";
      return kExitBadTokenizer;
    }
    auto compiled = chat_template::ChatTemplate::compile(**source);
    if (!compiled) {
      errors << "kvgate tokenize: " << compiled.error() << '\n';
      return kExitBadTokenizer;
    }
    chat_template.emplace(std::move(*compiled));
  }
  // One workspace per thread (its caches and scratch are not shared); the
  // tokenizer and the template are read-only here.
  auto make_processor = [&]() -> LineProcessor {
    auto workspace = std::make_shared<tokenizer::EncodeWorkspace>();
    auto ids = std::make_shared<std::vector<kvgate::TokenId>>();
    return [&, workspace, ids](const std::string& line, std::string& out) {
      try {
        if (chat) {
          encode_chat(*tokenizer, *chat_template, *workspace, line, *ids, out);
        } else {
          encode_text(*tokenizer, *workspace, line, *ids, out);
        }
      } catch (const std::exception& error) {
        // Out of memory, mostly: this line fails, the next is read.
        out = error_line(std::string("the line could not be processed: ") + error.what());
      }
    };
  };
  process_lines_in_order(input, output, OrderedLinesOptions{.threads = threads, .window = std::size_t{4} * threads},
                         make_processor);
  return 0;
}

}  // namespace kvgate::app
