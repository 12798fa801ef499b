#include "workload.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

namespace kvgate::load {
namespace {

// A recorded output length divided by output_scale, at least one token.
std::uint32_t scaled_output(std::uint64_t tokens, const WorkloadOptions& options) {
  const auto scaled = static_cast<double>(tokens) / std::max(options.output_scale, 1e-9);
  return static_cast<std::uint32_t>(std::clamp(std::round(scaled), 1.0, 1e6));
}

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

Turn chat_turn(std::string user, std::uint32_t max_tokens, std::uint32_t think_ms) {
  Turn turn;
  turn.user = std::move(user);
  turn.max_tokens = max_tokens;
  turn.think_ms = think_ms;
  return turn;
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
    session.turns.push_back(chat_turn(
        "Here is my order history: " + words(random, between(random, 800, 2000)) + " What happened to my last order?",
        32, 0));
    const auto turns = between(random, 4, 8);
    for (std::uint32_t turn = 1; turn < turns; ++turn) {
      // Named first: the order of a call's arguments is unspecified, and
      // the generator must be drawn from in one order on every compiler.
      auto question = words(random, between(random, 60, 240)) + "?";
      const auto think_ms = between(random, 0, 200);
      session.turns.push_back(chat_turn(std::move(question), 32, think_ms));
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
        chat_turn("Fix the failing test in module " + std::to_string(index) + ". " + words(random, 400), 64, 0));
    const auto turns = between(random, 6, 12);
    for (std::uint32_t turn = 1; turn < turns; ++turn) {
      session.turns.push_back(chat_turn("Tool output:\n" + words(random, between(random, 1500, 5000)), 64, 0));
    }
    workload.sessions.push_back(std::move(session));
  }
  return workload;
}

// Agent sessions of several kinds: each kind's sessions share a long tool
// preamble (~2,000 tokens: the tool definitions and instructions an agent
// framework sends first), one kind per eight sessions; a fifth of the
// sessions run long (12-24 turns), the rest are short (2-6), each turn
// appending a 0.4-2 kB tool output. Where cache-awareness matters: sticky
// sessions make every replica hold every preamble and pile the long
// sessions wherever their keys hash.
Workload tools_preset(const WorkloadOptions& options) {
  std::mt19937_64 random(options.seed);
  const std::uint32_t count = options.sessions == 0 ? 48 : options.sessions;
  std::vector<std::string> preambles;
  for (std::uint32_t kind = 0; kind < std::max<std::uint32_t>(2, count / 8); ++kind) {
    preambles.push_back("You are agent " + std::to_string(kind) + ". Tools and rules follow.\n" + words(random, 8'000));
  }
  Workload workload{"tools", {}, {}};
  for (std::uint32_t index = 0; index < count; ++index) {
    Session session{"tools-" + std::to_string(index), preambles[index % preambles.size()], {}};
    const bool long_session = random() % 5 == 0;
    const auto turns = long_session ? between(random, 12, 24) : between(random, 2, 6);
    auto task = "Task " + std::to_string(index) + ": " + words(random, 300);
    session.turns.push_back(chat_turn(std::move(task), 32, 0));
    for (std::uint32_t turn = 1; turn < turns; ++turn) {
      auto output = "Tool output:\n" + words(random, between(random, 400, 2'000));
      const auto think_ms = between(random, 0, 100);
      session.turns.push_back(chat_turn(std::move(output), 32, think_ms));
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
    session.turns.push_back(chat_turn(turn["user"].get<std::string>(), static_cast<std::uint32_t>(max_tokens),
                                      static_cast<std::uint32_t>(think_ms)));
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
  request.max_tokens = scaled_output(line["output_length"].get<std::uint64_t>(), options);
  const auto& ids = line["hash_ids"];
  // Mooncake counts the partial last block; scaled blocks keep its share.
  const auto input = line["input_length"].get<std::uint64_t>();
  const std::uint64_t block_tokens = options.trace_block_tokens == 0 ? 512 : options.trace_block_tokens;
  const std::uint64_t full_block_bytes = block_tokens * options.bytes_per_token;
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

// Sub-agent entries hold their own requests; they are flattened into the
// session in order (the replay runs them one after another).
void flatten_requests(const json& requests, std::vector<const json*>& out) {
  for (const auto& request : requests) {
    if (request.is_object() && request.value("type", "") == "subagent" && request.contains("requests") &&
        request["requests"].is_array()) {
      flatten_requests(request["requests"], out);
    } else {
      out.push_back(&request);
    }
  }
}

// The text of one recorded request: a block per hash id, then the tokens
// past the last full block. The ids are local to the session, except the
// leading tool and system preamble, which is the same in every session: its
// blocks get text shared by all sessions (as a real deployment shares them),
// the others text of their own; the tail is unique to the request.
Result<std::string, std::string> recorded_prompt(const json& request, std::uint64_t session_seed,
                                                 std::uint64_t shared_blocks, std::uint64_t native_tokens,
                                                 std::uint64_t block_bytes, std::uint64_t request_number) {
  std::string prompt;
  const auto& ids = request["hash_ids"];
  for (std::size_t block = 0; block < ids.size(); ++block) {
    if (!ids[block].is_number_unsigned()) {
      return unexpected(std::string("hash_ids must be non-negative integers"));
    }
    const auto id = ids[block].get<std::uint64_t>();
    const bool shared = block < shared_blocks && id == block + 1;
    prompt += block_text(shared ? id : id ^ (session_seed << 1 | 1), block_bytes);
  }
  const auto tail_tokens = request["in"].get<std::uint64_t>() % native_tokens;
  if (tail_tokens > 0) {
    const auto tail_bytes = std::max<std::uint64_t>(4, block_bytes * tail_tokens / native_tokens);
    prompt += block_text(session_seed + 0x5bd1e995ULL * (request_number + 1), tail_bytes);
  }
  return prompt;
}

// What every request of one recorded session (and its sub-agents) shares.
struct RecordedContext {
  const WorkloadOptions& options;
  std::string where;                // "line N: "
  std::uint64_t seed = 0;           // the session's text namespace (sub-agents share it)
  std::uint64_t shared_blocks = 0;  // the preamble every session shares, in blocks
  std::uint64_t native = 64;        // the recording's block size
  std::uint64_t block_bytes = 0;
  std::size_t requests = 0;  // numbers each request's unique tail
};

// Turns from a recorded request list; sub-agent entries are flattened in
// order, or, with parallel_subagents, consecutive ones become one fork.
Result<std::vector<Turn>, std::string> recorded_turns(const json& list, RecordedContext& context) {
  std::vector<const json*> requests;
  if (context.options.parallel_subagents) {
    for (const auto& request : list) {
      requests.push_back(&request);
    }
  } else {
    flatten_requests(list, requests);
  }
  auto is_subagent = [](const json& request) {
    return request.is_object() && request.value("type", "") == "subagent" && request.contains("requests") &&
           request["requests"].is_array();
  };
  std::vector<Turn> turns;
  for (std::size_t index = 0; index < requests.size(); ++index) {
    const auto& request = *requests[index];
    if (context.options.parallel_subagents && is_subagent(request)) {
      if (turns.empty() || !turns.back().fork()) {
        turns.emplace_back();
      }
      Session subagent;
      subagent.id = request.value("agent_id", "agent-" + std::to_string(turns.back().subagents.size() + 1));
      auto inner = recorded_turns(request["requests"], context);
      if (!inner) {
        return unexpected(inner.error());
      }
      subagent.turns = std::move(*inner);
      if (!subagent.turns.empty()) {
        turns.back().subagents.push_back(std::move(subagent));
      }
      continue;
    }
    if (!request.is_object() || !request.value("in", json()).is_number_unsigned() ||
        !request.value("hash_ids", json()).is_array()) {
      return unexpected(context.where + "request " + std::to_string(index) + " needs \"in\" and \"hash_ids\"");
    }
    auto prompt = recorded_prompt(request, context.seed, context.shared_blocks, context.native, context.block_bytes,
                                  context.requests++);
    if (!prompt) {
      return unexpected(context.where + prompt.error());
    }
    Turn turn;
    turn.prompt = std::move(*prompt);
    turn.max_tokens = scaled_output(request.value("out", std::uint64_t{1}), context.options);
    // The recorded think time precedes a request; the replay pauses after
    // the previous answer, which is the same gap.
    if (index + 1 < requests.size() && requests[index + 1]->is_object()) {
      const double think_seconds = requests[index + 1]->value("think_time", 0.0);
      auto think_ms = std::max(0.0, think_seconds) * 1000 / context.options.time_scale;
      if (context.options.max_think_ms != 0) {
        think_ms = std::min(think_ms, static_cast<double>(context.options.max_think_ms));
      }
      turn.think_ms = static_cast<std::uint32_t>(think_ms);
    }
    turns.push_back(std::move(turn));
  }
  return turns;
}

// A recorded agent session (WEKA's kv-cache-tester format).
Result<Session, std::string> parse_recorded_session(const json& line, std::size_t number,
                                                    const WorkloadOptions& options) {
  const auto where = "line " + std::to_string(number) + ": ";
  if (!line.is_object() || !line["requests"].is_array() || !line.value("block_size", json()).is_number_unsigned() ||
      line["block_size"].get<std::uint64_t>() == 0) {
    return unexpected(where + "a recorded session needs \"block_size\" and \"requests\"");
  }
  Session session;
  session.id = line.value("id", "recorded-" + std::to_string(number));
  const auto native = line["block_size"].get<std::uint64_t>();
  const std::uint64_t block_tokens = options.trace_block_tokens == 0 ? native : options.trace_block_tokens;
  const auto preamble = line.value("tool_tokens", std::uint64_t{0}) + line.value("system_tokens", std::uint64_t{0});
  RecordedContext context{options,
                          where,
                          static_cast<std::uint64_t>(std::hash<std::string>{}(session.id)),
                          preamble / native,
                          native,
                          block_tokens * options.bytes_per_token,
                          0};
  auto turns = recorded_turns(line["requests"], context);
  if (!turns) {
    return unexpected(turns.error());
  }
  session.turns = std::move(*turns);
  if (options.max_turns != 0 && session.turns.size() > options.max_turns) {
    session.turns.resize(options.max_turns);
  }
  if (session.turns.empty()) {
    return unexpected(where + "a recorded session needs at least one request");
  }
  return session;
}

}  // namespace

Result<Session, std::string> session_from_export(const json& document, const WorkloadOptions& options) {
  if (!document.is_object() || !document.contains("turns") || !document["turns"].is_array()) {
    return unexpected(std::string("not a /debug/sessions/<key> export (an object with \"turns\")"));
  }
  Session session;
  const auto key = document.find("key");
  session.id = key != document.end() && key->is_string() ? key->get<std::string>() : "exported";
  const auto seed = static_cast<std::uint64_t>(std::hash<std::string>{}(session.id));
  std::string prompt;
  std::size_t number = 0;
  for (const auto& turn : document["turns"]) {
    ++number;
    const auto where = "turn " + std::to_string(number) + ": ";
    if (!turn.is_object() || !turn.value("input_tokens", json()).is_number_unsigned() ||
        turn["input_tokens"].get<std::uint64_t>() == 0) {
      return unexpected(where + "needs a positive \"input_tokens\"");
    }
    const auto bytes = turn["input_tokens"].get<std::uint64_t>() * options.bytes_per_token;
    if (bytes > (std::uint64_t{1} << 30)) {
      return unexpected(where + "\"input_tokens\" is out of range");
    }
    if (bytes < prompt.size()) {
      prompt.clear();  // a shorter prompt than the last: the conversation was cut back
    }
    if (bytes > prompt.size()) {
      prompt += block_text(seed + number, bytes - prompt.size());
    }
    Turn step;
    step.prompt = prompt.substr(0, bytes);
    step.max_tokens = 16;
    session.turns.push_back(std::move(step));
  }
  if (session.turns.empty()) {
    return unexpected(std::string("the export has no turns"));
  }
  if (options.max_turns != 0 && session.turns.size() > options.max_turns) {
    session.turns.resize(options.max_turns);
  }
  return session;
}

const std::vector<std::string_view>& preset_names() {
  static const std::vector<std::string_view> kNames = {"chat", "agent", "tools"};
  return kNames;
}

Result<Workload, std::string> make_preset(std::string_view name, const WorkloadOptions& options) {
  if (name == "chat") {
    return chat_preset(options);
  }
  if (name == "agent") {
    return agent_preset(options);
  }
  if (name == "tools") {
    return tools_preset(options);
  }
  return unexpected("unknown preset '" + std::string(name) + "' (chat, agent, tools)");
}

Result<Workload, std::string> parse_workload(std::string_view text, std::string name, const WorkloadOptions& options) {
  Workload workload;
  workload.name = std::move(name);
  std::size_t number = 0;
  bool trace = false;
  bool recorded = false;
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
      if (options.strict) {
        return unexpected("line " + std::to_string(number) + ": not JSON");
      }
      workload.skipped.push_back("line " + std::to_string(number) + ": not JSON");
      continue;
    }
    if (workload.sessions.empty() && workload.trace.empty()) {
      trace = line.is_object() && line.contains("hash_ids");
      recorded = line.is_object() && line.contains("requests") && line.contains("block_size");
    }
    if (trace) {
      if (options.max_requests != 0 && workload.trace.size() >= options.max_requests) {
        break;
      }
      auto request = parse_trace_line(line, number, options);
      if (!request && options.strict) {
        return unexpected(request.error());
      }
      if (!request) {
        workload.skipped.push_back(request.error());
        continue;
      }
      workload.trace.push_back(std::move(*request));
    } else {
      if (options.sessions != 0 && workload.sessions.size() >= options.sessions) {
        break;
      }
      auto session = recorded ? parse_recorded_session(line, number, options) : parse_session(line, number);
      if (!session && options.strict) {
        return unexpected(session.error());
      }
      if (!session) {
        workload.skipped.push_back(session.error());
        continue;
      }
      workload.sessions.push_back(std::move(*session));
    }
  }
  if (workload.sessions.empty() && workload.trace.empty()) {
    return unexpected(workload.skipped.empty() ? std::string("the workload has no sessions or requests")
                                               : "no usable line; the first problem: " + workload.skipped.front());
  }
  return workload;
}

void assign_adapters(Workload& workload, std::uint32_t count, double zipf, std::uint64_t seed) {
  if (count == 0) {
    return;
  }
  std::vector<double> cumulative(count);
  double total = 0;
  for (std::uint32_t adapter = 0; adapter < count; ++adapter) {
    total += 1.0 / std::pow(static_cast<double>(adapter + 1), zipf);
    cumulative[adapter] = total;
  }
  std::mt19937_64 generator(seed ^ 0x10Aull);
  std::uniform_real_distribution<double> uniform(0, total);
  for (auto& session : workload.sessions) {
    const auto drawn = uniform(generator);
    const auto at = std::lower_bound(cumulative.begin(), cumulative.end(), drawn) - cumulative.begin();
    session.model = "adapter-" + std::to_string(std::min<std::ptrdiff_t>(at, count - 1));
  }
}

}  // namespace kvgate::load
