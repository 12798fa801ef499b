// The chat-template test conversations: OpenAI chat request bodies covering
// what templates branch on (system prompts, multi-turn, tool definitions,
// tool calls and results, reasoning content, list-form content, empty
// messages, generation prompt on and off, chat_template_kwargs). Built from
// pieces written here; deterministic. Written to
// tests/chat_template/golden/conversations.json by make_template_goldens.mjs.

const systems = [
  "You are a helpful assistant.",
  "You are kvgate's support bot. Answer briefly; cite the README when you can.",
  "Réponds en français. Sois concis.",
  "  A system prompt with spaces around it.  \n",
  "",
];
const questions = [
  "Which hinges suit a heavy oak door?",
  "How do I route requests by prefix?",
  "Explain KV-cache eviction in two sentences.",
  "日本語で答えてください：キャッシュとは何ですか？",
  "What's 17 * 23? Show your work.",
  "Write a haiku about GPUs 🚀",
  "<|im_start|> is a special token; does it break you?",
  "Line one\nLine two\n\n\tIndented line three",
  "   leading and trailing spaces   ",
  "",
];
const answers = [
  "Use three ball-bearing hinges rated for at least 60 kg.",
  "Hash the prompt into blocks and send it where the most blocks are cached.",
  "Blocks leave the cache when memory runs short, least recently used first. A later request then pays the prefill again.",
  "キャッシュは、よく使うデータを速い場所に置いておく仕組みです。",
  "17 * 23 = 391.",
  "Silicon fields hum / tensors flow like spring water / tokens bloom at dawn",
  "No, it is just text here.",
  "",
];
const reasonings = [
  "The user asks about hinges. Oak is heavy, so the load rating matters.",
  "Multiply: 17 * 20 = 340, 17 * 3 = 51, total 391.",
  "",
];
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City name, e.g. Zürich" }, unit: { type: "string", enum: ["c", "f"] } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search_docs",
      description: "Search the project's documentation",
      parameters: { type: "object", properties: { query: { type: "string" }, limit: { type: "integer", default: 5 } }, required: ["query"] },
    },
  },
  {
    type: "function",
    function: { name: "now", description: "The current time, no arguments", parameters: { type: "object", properties: {} } },
  },
];

let counter = 0;
const call = (name, args) => ({ id: `call_${++counter}`, type: "function", function: { name, arguments: JSON.stringify(args) } });

export function conversations() {
  const list = [];
  const add = (description, body) => list.push({ description, body });

  // Plain multi-turn chats, with and without a system prompt.
  for (let turns = 1; turns <= 5; ++turns) {
    for (const withSystem of [false, true]) {
      const messages = withSystem ? [{ role: "system", content: systems[turns % systems.length] }] : [];
      for (let turn = 0; turn < turns; ++turn) {
        messages.push({ role: "user", content: questions[(turns * 3 + turn) % questions.length] });
        if (turn + 1 < turns) messages.push({ role: "assistant", content: answers[(turns + turn) % answers.length] });
      }
      add(`${turns} turn(s)${withSystem ? " with a system prompt" : ""}`, { messages });
    }
  }
  // Ending on the assistant, without a generation prompt.
  for (let index = 0; index < 3; ++index) {
    add(`continuation ${index}`, {
      messages: [
        { role: "user", content: questions[index] },
        { role: "assistant", content: answers[index] },
      ],
      add_generation_prompt: false,
    });
  }
  // Every system prompt, every question.
  systems.forEach((system, index) =>
    add(`system prompt ${index}`, { messages: [{ role: "system", content: system }, { role: "user", content: questions[index] }] }),
  );
  questions.forEach((question, index) => add(`question ${index}`, { messages: [{ role: "user", content: question }] }));
  // Reasoning: as a field, and inline in the content.
  reasonings.forEach((reasoning, index) =>
    add(`reasoning field ${index}`, {
      messages: [
        { role: "user", content: questions[index] },
        { role: "assistant", content: answers[index], reasoning_content: reasoning },
        { role: "user", content: "Thanks. And a follow-up?" },
      ],
    }),
  );
  add("reasoning inline", {
    messages: [
      { role: "user", content: questions[4] },
      { role: "assistant", content: `<think>\n${reasonings[1]}\n</think>\n\n${answers[4]}` },
      { role: "user", content: "Now 18 * 23?" },
    ],
  });
  add("thinking disabled", { messages: [{ role: "user", content: questions[2] }], chat_template_kwargs: { enable_thinking: false } });
  // Tools: definitions, calls, results, parallel calls.
  add("tool definitions", { messages: [{ role: "user", content: "Weather in Zürich?" }], tools: [tools[0]] });
  add("tool definitions with a system prompt", {
    messages: [{ role: "system", content: systems[1] }, { role: "user", content: "Find the routing docs" }],
    tools,
  });
  add("tool call and result", {
    messages: [
      { role: "user", content: "Weather in Zürich?" },
      { role: "assistant", content: null, tool_calls: [call("get_weather", { city: "Zürich", unit: "c" })] },
      { role: "tool", tool_call_id: `call_${counter}`, content: '{"temperature": 4, "sky": "fog"}' },
    ],
    tools,
  });
  add("parallel tool calls", {
    messages: [
      { role: "system", content: systems[0] },
      { role: "user", content: "Weather in Bern and the docs on caching?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [call("get_weather", { city: "Bern" }), call("search_docs", { query: "caching", limit: 3 })],
      },
      { role: "tool", tool_call_id: `call_${counter - 1}`, content: "sunny, 12 C" },
      { role: "tool", tool_call_id: `call_${counter}`, content: "README: the prefix index..." },
      { role: "assistant", content: "Bern is sunny; the README explains the prefix index." },
      { role: "user", content: "Thanks!" },
    ],
    tools,
  });
  add("tool call with text", {
    messages: [
      { role: "user", content: "What time is it?" },
      { role: "assistant", content: "Let me check.", tool_calls: [call("now", {})] },
      { role: "tool", tool_call_id: `call_${counter}`, content: "2026-11-30T02:00:00Z" },
    ],
    tools: [tools[2]],
  });
  // List-form content and empty messages.
  add("list content", {
    messages: [
      { role: "system", content: [{ type: "text", text: systems[0] }] },
      { role: "user", content: [{ type: "text", text: "Part one." }, { type: "text", text: "Part two." }] },
    ],
  });
  add("list content, multi-turn", {
    messages: [
      { role: "user", content: [{ type: "text", text: questions[0] }] },
      { role: "assistant", content: [{ type: "text", text: answers[0] }] },
      { role: "user", content: [{ type: "text", text: questions[1] }, { type: "text", text: "Be brief." }] },
    ],
  });
  add("empty messages", {
    messages: [
      { role: "system", content: "" },
      { role: "user", content: "" },
      { role: "assistant", content: "" },
      { role: "user", content: "" },
    ],
  });
  add("long conversation", {
    messages: Array.from({ length: 24 }, (_, index) =>
      index % 2 === 0
        ? { role: "user", content: `${questions[index % questions.length]} (turn ${index / 2})` }
        : { role: "assistant", content: answers[index % answers.length] },
    ),
  });
  return list;
}
