#include "workload.hpp"

#include <array>
#include <random>

#include <nlohmann/json.hpp>

namespace kvgate::load {
namespace {

using nlohmann::json;

// Words for generated text: ordinary English, so that a real tokenizer sees
// prose rather than noise.
constexpr std::array<std::string_view, 64> kWords = {
    "order",   "delivery", "account", "refund",  "parcel",   "invoice", "address", "window",  "kitchen", "garden",
    "printer", "screen",   "cable",   "battery", "charger",  "folder",  "report",  "meeting", "budget",  "client",
    "server",  "request",  "answer",  "policy",  "warranty", "label",   "store",   "price",   "colour",  "size",
    "quickly", "today",    "later",   "again",   "before",   "after",   "never",   "always",  "often",   "soon",
    "check",   "replace",  "send",    "open",    "close",    "update",  "cancel",  "confirm", "explain", "compare",
    "the",     "a",        "my",      "your",    "with",     "without", "from",    "into",    "about",   "for",
    "broken",  "missing",  "late",    "new"};

std::string words(std::mt19937_64& random, std::size_t bytes) {
  std::string text;
  text.reserve(bytes + 16);
  while (text.size() < bytes) {
    text += kWords[random() % kWords.size()];
    text += random() % 9 == 0 ? ". " : " ";
  }
  return text;
}

std::uint32_t between(std::mt19937_64& random, std::uint32_t low, std::uint32_t high) {
  return low + static_cast<std::uint32_t>(random() % (high - low + 1));
}

Workload chat_preset(const WorkloadOptions& options) {
  std::mt19937_64 random(options.seed);
  const std::uint32_t count = options.sessions == 0 ? 24 : options.sessions;
  // One system prompt per four sessions (~1.6 kB, ~400 tokens): what a
  // product's different assistants would send.
  std::vector<std::string> systems;
  for (std::uint32_t group = 0; group < (count + 3) / 4; ++group) {
    systems.push_back("You are assistant number " + std::to_string(group) + " of the shop. " + words(random, 1600));
  }
  Workload workload{"chat", {}, {}};
  for (std::uint32_t index = 0; index < count; ++index) {
    Session session{"chat-" + std::to_string(index), systems[index / 4], {}};
    session.turns.push_back(
        {"Here is my order history: " + words(random, between(random, 800, 2000)) + " What happened to my last order?",
         32, 0});
    const auto turns = between(random, 4, 8);
    for (std::uint32_t turn = 1; turn < turns; ++turn) {
      session.turns.push_back({words(random, between(random, 60, 240)) + "?", 32, between(random, 0, 200)});
    }
    workload.sessions.push_back(std::move(session));
  }
  return workload;
}

Workload agent_preset(const WorkloadOptions& options) {
  std::mt19937_64 random(options.seed);
  const std::uint32_t count = options.sessions == 0 ? 8 : options.sessions;
  const std::string system = "You are a coding agent. Use the tools to read and change files. " + words(random, 6000);
  Workload workload{"agent", {}, {}};
  for (std::uint32_t index = 0; index < count; ++index) {
    Session session{"agent-" + std::to_string(index), system, {}};
    session.turns.push_back(
        {"Fix the failing test in module " + std::to_string(index) + ". " + words(random, 400), 64, 0});
    const auto turns = between(random, 6, 12);
    for (std::uint32_t turn = 1; turn < turns; ++turn) {
      session.turns.push_back({"Tool output:\n" + words(random, between(random, 1500, 5000)), 64, 0});
    }
    workload.sessions.push_back(std::move(session));
  }
  return workload;
}

Result<Session, std::string> parse_session(const json& line, std::size_t number) {
  const auto where = "line " + std::to_string(number) + ": ";
  if (!line.is_object() || !line.contains("turns") || !line["turns"].is_array() || line["turns"].empty()) {
    return unexpected(where + "a session needs a non-empty \"turns\" list");
  }
  Session session;
  session.id = line.value("id", "session-" + std::to_string(number));
  if (line.contains("system") && !line["system"].is_string()) {
    return unexpected(where + "\"system\" must be a string");
  }
  session.system = line.value("system", "");
  for (const auto& turn : line["turns"]) {
    if (!turn.is_object() || !turn.contains("user") || !turn["user"].is_string()) {
      return unexpected(where + "each turn needs a \"user\" string");
    }
    const auto max_tokens = turn.value("max_tokens", 32);
    const auto think_ms = turn.value("think_ms", 0);
    if (max_tokens < 1 || think_ms < 0) {
      return unexpected(where + "max_tokens must be at least 1 and think_ms not negative");
    }
    session.turns.push_back({turn["user"].get<std::string>(), static_cast<std::uint32_t>(max_tokens),
                             static_cast<std::uint32_t>(think_ms)});
  }
  return session;
}

// Text for one trace block: a function of its hash id only (the id already
// stands for the whole prefix up to it), so requests sharing leading ids
// share leading text, byte for byte and therefore token for token.
std::string block_text(std::uint64_t hash_id, std::size_t bytes) {
  std::mt19937_64 random(hash_id * 0x9e3779b97f4a7c15ULL + 1);
  auto text = "[" + std::to_string(hash_id) + "] " + words(random, bytes);
  text.resize(bytes);
  text.back() = '\n';
  return text;
}

Result<TraceRequest, std::string> parse_trace_line(const json& line, std::size_t number,
                                                   const WorkloadOptions& options) {
  const auto where = "line " + std::to_string(number) + ": ";
  if (!line.is_object() || !line.contains("hash_ids") || !line["hash_ids"].is_array() ||
      !line.value("timestamp", json()).is_number() || !line.value("input_length", json()).is_number_unsigned() ||
      !line.value("output_length", json()).is_number_unsigned()) {
    return unexpected(where + "a trace line needs timestamp, input_length, output_length and hash_ids");
  }
  TraceRequest request;
  request.arrival_ms = line["timestamp"].get<double>() / options.time_scale;
  request.max_tokens = std::max<std::uint32_t>(1, line["output_length"].get<std::uint32_t>());
  const auto& ids = line["hash_ids"];
  // Mooncake counts the partial last block; scaled blocks keep its share.
  const auto input = line["input_length"].get<std::uint64_t>();
  const std::uint64_t full_block_bytes = std::uint64_t{options.trace_block_tokens} * options.bytes_per_token;
  const std::uint64_t last_tokens = input % 512 == 0 ? 512 : input % 512;
  for (std::size_t block = 0; block < ids.size(); ++block) {
    if (!ids[block].is_number_unsigned()) {
      return unexpected(where + "hash_ids must be non-negative integers");
    }
    const bool last = block + 1 == ids.size();
    const auto bytes = last ? std::max<std::uint64_t>(options.bytes_per_token, full_block_bytes * last_tokens / 512)
                            : full_block_bytes;
    request.prompt += block_text(ids[block].get<std::uint64_t>(), bytes);
  }
  return request;
}

}  // namespace

const std::vector<std::string_view>& preset_names() {
  static const std::vector<std::string_view> kNames = {"chat", "agent"};
  return kNames;
}

Result<Workload, std::string> make_preset(std::string_view name, const WorkloadOptions& options) {
  if (name == "chat") {
    return chat_preset(options);
  }
  if (name == "agent") {
    return agent_preset(options);
  }
  return unexpected("unknown preset '" + std::string(name) + "' (chat, agent)");
}

Result<Workload, std::string> parse_workload(std::string_view text, std::string name, const WorkloadOptions& options) {
  Workload workload;
  workload.name = std::move(name);
  std::size_t number = 0;
  bool trace = false;
  while (!text.empty()) {
    const auto end = text.find('\n');
    auto raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    if (raw.find_first_not_of(" \t\r") == std::string_view::npos) {
      continue;
    }
    auto line = json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (line.is_discarded()) {
      return unexpected("line " + std::to_string(number) + ": not JSON");
    }
    if (workload.sessions.empty() && workload.trace.empty()) {
      trace = line.is_object() && line.contains("hash_ids");
    }
    if (trace) {
      if (options.max_requests != 0 && workload.trace.size() >= options.max_requests) {
        break;
      }
      auto request = parse_trace_line(line, number, options);
      if (!request) {
        return unexpected(request.error());
      }
      workload.trace.push_back(std::move(*request));
    } else {
      if (options.sessions != 0 && workload.sessions.size() >= options.sessions) {
        break;
      }
      auto session = parse_session(line, number);
      if (!session) {
        return unexpected(session.error());
      }
      workload.sessions.push_back(std::move(*session));
    }
  }
  if (workload.sessions.empty() && workload.trace.empty()) {
    return unexpected("the workload has no sessions or requests");
  }
  return workload;
}

}  // namespace kvgate::load
