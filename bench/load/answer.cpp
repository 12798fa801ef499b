#include "answer.hpp"

#include <nlohmann/json.hpp>

namespace kvgate::load {

using nlohmann::json;

void read_events(const std::string& events, Answer& answer) {
  std::size_t position = 0;
  while (position < events.size()) {
    auto end = events.find('\n', position);
    if (end == std::string::npos) {
      end = events.size();
    }
    std::string_view line(events.data() + position, end - position);
    position = end + 1;
    if (!line.starts_with("data:")) {
      continue;
    }
    line.remove_prefix(line.starts_with("data: ") ? 6 : 5);
    if (line == "[DONE]") {
      continue;
    }
    auto event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object()) {
      continue;
    }
    if (event.contains("error")) {
      answer.error = "stream_error";
    }
    if (auto choices = event.find("choices"); choices != event.end() && choices->is_array() && !choices->empty()) {
      const auto& choice = (*choices)[0];
      if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
        if (auto content = delta->find("content"); content != delta->end() && content->is_string()) {
          answer.text += content->get<std::string>();
        }
      } else if (auto text = choice.find("text"); text != choice.end() && text->is_string()) {
        answer.text += text->get<std::string>();
      }
    }
    if (auto usage = event.find("usage"); usage != event.end() && usage->is_object()) {
      answer.prompt_tokens = usage->value("prompt_tokens", 0u);
      answer.output_tokens = usage->value("completion_tokens", 0u);
      const auto details = usage->value("prompt_tokens_details", json::object());
      answer.cached_tokens = details.is_object() ? details.value("cached_tokens", 0u) : 0u;
    }
    // llama.cpp reports its prompt-cache hit only as timings.cache_n.
    if (auto timings = event.find("timings"); timings != event.end() && timings->is_object()) {
      if (auto cache_n = timings->find("cache_n"); cache_n != timings->end() && cache_n->is_number_unsigned()) {
        answer.cached_tokens = cache_n->get<std::uint32_t>();
      }
    }
  }
}

}  // namespace kvgate::load
