#pragma once
// What kvgate-bench sends: multi-turn chat sessions (the project's session
// JSON lines, or a generated preset) or a timed trace of completions
// (Mooncake's JSON lines). Pure: text in, workload out, deterministic for a
// seed.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvgate/core/result.hpp"

namespace kvgate::load {

struct Session;

struct Turn {
  std::string user;    // the user message of this turn (chat sessions)
  std::string prompt;  // the whole prompt (recorded sessions: a text completion)
  std::uint32_t max_tokens = 32;
  std::uint32_t think_ms = 0;  // pause after the answer, before the next turn
  // A fork (recorded sessions read with parallel_subagents): these
  // sub-agents run at once, each its requests in turn, with the session's
  // key (as Claude Code sends its sub-agents' requests), and the session
  // goes on when all have ended. A fork sends no request of its own.
  std::vector<Session> subagents;
  [[nodiscard]] bool fork() const { return !subagents.empty(); }
};

// One conversation. A chat session's turn sends the system prompt, every
// earlier turn with the answer the target actually gave, then the new user
// message; a recorded session's turn (`prompt` set) sends its own text.
struct Session {
  std::string id;
  std::string system;
  std::vector<Turn> turns;
  std::string model;  // the model or LoRA adapter its requests name; empty: the run's model
};

// One request of a trace: a text completion at a fixed arrival time.
struct TraceRequest {
  double arrival_ms = 0;
  std::string prompt;
  std::uint32_t max_tokens = 1;
};

struct Workload {
  std::string name;
  std::vector<Session> sessions;    // a session workload, or
  std::vector<TraceRequest> trace;  // a trace
  // Lines left out ("line N: why"): malformed ones when not strict.
  std::vector<std::string> skipped;
};

struct WorkloadOptions {
  std::uint64_t seed = 1;
  std::uint32_t sessions = 0;            // presets: how many; files: the first N (0: all)
  std::uint32_t max_requests = 0;        // traces: the first N (0: all)
  std::uint32_t trace_block_tokens = 0;  // tokens each trace hash id stands for (0: the trace's own)
  std::uint32_t bytes_per_token = 4;     // prompt bytes per token when synthesising trace text
  double time_scale = 1;                 // traces: arrival times divided by this; sessions: think times
  std::uint32_t max_think_ms = 0;        // recorded sessions: cap on a scaled think time (0: none)
  std::uint32_t max_turns = 0;           // sessions: their first N turns (0: all)
  // Traces and recorded sessions: output lengths divided by this (at least
  // one token), to keep decode in proportion when trace_block_tokens
  // shortens the prompts.
  double output_scale = 1;
  bool strict = false;  // a malformed line refuses the file instead of being skipped
  // Recorded sessions: consecutive sub-agent entries become one fork whose
  // sub-agents run at once; otherwise their requests are flattened into the
  // session in order.
  bool parallel_subagents = false;
  // Sessions spread over this many LoRA adapters (assign_adapters); 0: the
  // run's model.
  std::uint32_t adapters = 0;
  double adapter_zipf = 1.0;
};

// Spreads the sessions over `count` LoRA adapters named adapter-0 ..
// adapter-(count-1) (Session::model), adapter i chosen with a probability
// proportional to 1 / (i + 1)^zipf, deterministically for `seed`: many
// adapters on one base model, a few popular.
void assign_adapters(Workload& workload, std::uint32_t count, double zipf, std::uint64_t seed);

// Presets: "chat" (support chats: groups of sessions share a system prompt,
// each pastes its own document in turn one, then short questions) and
// "agent" (coding-agent sessions: long tool outputs appended every turn).
[[nodiscard]] const std::vector<std::string_view>& preset_names();
Result<Workload, std::string> make_preset(std::string_view name, const WorkloadOptions& options);

// Session JSON lines: {"id", "system", "turns": [{"user", "max_tokens",
// "think_ms"}]}; Mooncake trace lines: {"timestamp" (ms), "input_length",
// "output_length", "hash_ids"}; recorded agent sessions (WEKA's Claude Code
// traces): one session per line, {"id", "block_size", "tool_tokens",
// "system_tokens", "requests": [{"in", "out", "hash_ids", "think_time"}]}.
// The format is told by the first line.
Result<Workload, std::string> parse_workload(std::string_view text, std::string name, const WorkloadOptions& options);

// A session as GET /debug/sessions/<key> exports it ({"key", "turns":
// [{"turn", "input_tokens", ...}]}): the export holds token counts, not
// text, so each turn's prompt is synthesised at its recorded length
// (bytes_per_token bytes a token), extending the turn before it as a
// conversation's prompt does. Errors name the turn.
Result<Session, std::string> session_from_export(const nlohmann::json& document, const WorkloadOptions& options);

}  // namespace kvgate::load
