// The reference implementation's throughput on the same corpus documents as
// kvgate-tokenizer-bench: @huggingface/tokenizers (tools/goldens) encoding
// every document of one kind, repeated for about two seconds after a warm-up
// pass (its word cache warm, like kvgate's steady state).
// Usage: node reference.mjs FAMILY KIND   -> prints "KIND MB/s (FAMILY, loaded in N ms)"
import path from "node:path";
import { loadCorpus, loadTokenizer } from "../../tools/goldens/make_goldens.mjs";

const [family = "qwen3", kind = "prose"] = process.argv.slice(2);
const documents = loadCorpus().filter((document) => document.kind === kind).map((document) => document.text);
const bytes = documents.reduce((sum, text) => sum + Buffer.byteLength(text), 0);
const loadStart = process.hrtime.bigint();
const tokenizer = loadTokenizer(family);
const loadMs = Number(process.hrtime.bigint() - loadStart) / 1e6;
const encodeAll = () => documents.forEach((text) => tokenizer.encode(text, { add_special_tokens: false }));
encodeAll();
let rounds = 0;
const start = process.hrtime.bigint();
let elapsed = 0;
while (elapsed < 2) {
  encodeAll();
  ++rounds;
  elapsed = Number(process.hrtime.bigint() - start) / 1e9;
}
console.log(`${kind} ${((bytes * rounds) / elapsed / 1e6).toFixed(2)} MB/s (${path.basename(family)}, loaded in ${loadMs.toFixed(0)} ms)`);
