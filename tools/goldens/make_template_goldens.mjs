// Renders every test conversation (conversations.mjs) with every model's chat
// template using @huggingface/jinja (pinned in package.json), the way vLLM
// prepares a chat request for its template, and encodes the result with
// @huggingface/tokenizers. Writes tests/chat_template/golden/conversations.json
// and tests/chat_template/golden/<family>.json.gz: per conversation either
// {"prompt", "ids"} or {"error"}.
//
// Request preparation mirrored from vLLM (chat_utils): when the template
// loops over message content, content becomes a list of parts (a string is
// one text part, null none); otherwise the text parts joined by "\n" (null
// becomes ""). Tool-call arguments given as JSON strings are parsed to
// objects.
//
// Usage: node make_template_goldens.mjs   (from tools/goldens)
import { readFileSync, writeFileSync, readdirSync, mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import path from "node:path";
import { Template } from "@huggingface/jinja";
import { loadTokenizer } from "./make_goldens.mjs";
import { conversations } from "./conversations.mjs";

const top = path.resolve(import.meta.dirname, "../..");
const output = path.join(top, "tests/chat_template/golden");
const tokenizerFolder = path.join(top, ".cache/tokenizers");
// A fixed clock for strftime_now, matching the C++ test's.
const NOW = new Date(2026, 10, 30, 12, 0, 0);

const tokenText = (token) => (token && typeof token === "object" ? token.content : token ?? null);
const iteratesContent = (source) => /for\s+\w+\s+in\s+[\w.]*(\[\s*['"]content['"]\s*\]|\.content\b)/.test(source);

export function prepareMessages(messages, keepListContent) {
  return messages.map((message) => {
    // vLLM builds a new message: role and content first, then the rest.
    const prepared = { role: message.role, content: null, ...message };
    const parts =
      prepared.content == null ? [] : typeof prepared.content === "string" ? [{ type: "text", text: prepared.content }] : prepared.content;
    prepared.content = keepListContent
      ? parts
      : parts.filter((part) => part.type === "text").map((part) => part.text).join("\n");
    if (prepared.role === "assistant" && Array.isArray(prepared.tool_calls)) {
      prepared.tool_calls = prepared.tool_calls.map((item) => {
        const arguments_ = item.function?.arguments;
        const parsed = !arguments_ ? {} : typeof arguments_ === "string" ? JSON.parse(arguments_) : arguments_;
        return { ...item, function: { ...item.function, arguments: parsed } };
      });
    }
    return prepared;
  });
}

mkdirSync(output, { recursive: true });
const all = conversations();
writeFileSync(path.join(output, "conversations.json"), JSON.stringify(all, null, 1) + "\n");
for (const family of readdirSync(tokenizerFolder).sort()) {
  const config = JSON.parse(readFileSync(path.join(tokenizerFolder, family, "tokenizer_config.json"), "utf8"));
  if (typeof config.chat_template !== "string") {
    console.log(`${family}: no chat_template in tokenizer_config.json, skipped`);
    continue;
  }
  const template = new Template(config.chat_template);
  const tokenizer = loadTokenizer(family);
  const keepList = iteratesContent(config.chat_template);
  const realDate = globalThis.Date;
  globalThis.Date = class extends realDate {
    constructor(...args) {
      super(...(args.length ? args : [NOW.getTime()]));
    }
  };
  const results = all.map(({ body }) => {
    try {
      const prompt = template.render({
        messages: prepareMessages(body.messages, keepList),
        ...(body.tools ? { tools: body.tools } : {}),
        add_generation_prompt: body.add_generation_prompt ?? true,
        bos_token: tokenText(config.bos_token),
        eos_token: tokenText(config.eos_token),
        ...(body.chat_template_kwargs ?? {}),
      });
      return { prompt, ids: tokenizer.encode(prompt, { add_special_tokens: false }).ids };
    } catch (error) {
      return { error: String(error.message ?? error) };
    }
  });
  globalThis.Date = realDate;
  writeFileSync(path.join(output, `${family}.json.gz`), gzipSync(JSON.stringify(results) + "\n", { level: 9 }));
  const errors = results.filter((result) => result.error).length;
  console.log(`${family}: ${results.length} conversations (${errors} template errors), keeps list content: ${keepList}`);
}
