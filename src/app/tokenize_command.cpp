#include "tokenize_command.hpp"

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "kvgate/chat_template/chat_template.hpp"
#include "kvgate/prompt/chat_request.hpp"
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

ordered_json error_line(const std::string& message) {
  return ordered_json{{"error", message}};
}

ordered_json encode_text(const tokenizer::Tokenizer& tokenizer, tokenizer::EncodeWorkspace& workspace,
                         const std::string& line) {
  auto request = ordered_json::parse(line, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("text") || !request["text"].is_string()) {
    return error_line("each line must be a JSON object with a string \"text\"");
  }
  std::vector<kvgate::TokenId> ids;
  auto encoded = tokenizer.encode(request["text"].get<std::string>(), false, workspace, ids);
  if (!encoded) return error_line(encoded.error());
  return ordered_json{{"ids", ids}};
}

ordered_json encode_chat(const tokenizer::Tokenizer& tokenizer, const chat_template::ChatTemplate& chat_template,
                         tokenizer::EncodeWorkspace& workspace, const std::string& line) {
  auto request = ordered_json::parse(line, nullptr, false);
  if (request.is_discarded()) return error_line("the line is not valid JSON");
  auto input =
      prompt::render_input_from_request(request, chat_template, prompt::special_tokens_from_config(tokenizer.config()));
  if (!input) return error_line(input.error());
  input->now = local_now();
  auto prompt = chat_template.render(*input);
  if (!prompt) return error_line(prompt.error());
  std::vector<kvgate::TokenId> ids;
  auto encoded = tokenizer.encode(*prompt, false, workspace, ids);
  if (!encoded) return error_line(encoded.error());
  return ordered_json{{"prompt", *prompt}, {"ids", ids}};
}

}  // namespace

int run_tokenize(const std::string& folder, bool chat, std::istream& input, std::ostream& output,
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
    const auto& config = tokenizer->config();
    if (!config.contains("chat_template") || !config["chat_template"].is_string()) {
      errors << "kvgate tokenize: " << folder << "/tokenizer_config.json has no chat_template\n";
      return kExitBadTokenizer;
    }
    auto compiled = chat_template::ChatTemplate::compile(config["chat_template"].get<std::string>());
    if (!compiled) {
      errors << "kvgate tokenize: " << compiled.error() << '\n';
      return kExitBadTokenizer;
    }
    chat_template.emplace(std::move(*compiled));
  }
  tokenizer::EncodeWorkspace workspace;
  std::string line;
  while (std::getline(input, line)) {
    if (line.empty()) continue;
    ordered_json result =
        chat ? encode_chat(*tokenizer, *chat_template, workspace, line) : encode_text(*tokenizer, workspace, line);
    output << result.dump(-1, ' ', false, ordered_json::error_handler_t::replace) << '\n';
  }
  output.flush();
  return 0;
}

}  // namespace kvgate::app
