// Encodes the committed corpus with Hugging Face's JavaScript tokenizer
// (@huggingface/tokenizers, pinned in package.json) for every tokenizer folder
// in .cache/tokenizers (scripts/fetch_tokenizers.sh), and writes
// tests/tokenizer/golden/<family>.jsonl.gz, one line per corpus document:
//   {"count": N, "ids_fnv": "<hex>", "decoded_fnv": "<hex>"[, "ids": [...]][, "with_special": [...]]}
// Full ids are kept for every eighth document and every short one, the rest as
// a 64-bit FNV-1a digest of the ids (little-endian uint32) so the files stay
// small; a digest mismatch names the document, and re-running this script
// with --full writes every id for a local diff.
//
// Usage: node make_goldens.mjs [--full] [family...]   (from tools/goldens)
import { readFileSync, writeFileSync, readdirSync } from "node:fs";
import { gunzipSync, gzipSync } from "node:zlib";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const top = path.resolve(import.meta.dirname, "../..");
const goldenFolder = path.join(top, "tests/tokenizer/golden");
const tokenizerFolder = path.join(top, ".cache/tokenizers");
const full = process.argv.includes("--full");
const requested = process.argv.slice(2).filter((argument) => !argument.startsWith("--"));

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;
function fnvBytes(bytes) {
  let hash = FNV_OFFSET;
  for (const byte of bytes) hash = ((hash ^ BigInt(byte)) * FNV_PRIME) & MASK;
  return hash.toString(16).padStart(16, "0");
}
function fnvIds(ids) {
  const bytes = new Uint8Array(ids.length * 4);
  const view = new DataView(bytes.buffer);
  ids.forEach((id, index) => view.setUint32(index * 4, id, true));
  return fnvBytes(bytes);
}

export function loadCorpus() {
  const text = gunzipSync(readFileSync(path.join(goldenFolder, "corpus.jsonl.gz"))).toString("utf8");
  return text.split("\n").filter((line) => line).map((line) => JSON.parse(line));
}

export function loadTokenizer(family) {
  const folder = path.join(tokenizerFolder, family);
  const tokenizerJson = JSON.parse(readFileSync(path.join(folder, "tokenizer.json"), "utf8"));
  const config = JSON.parse(readFileSync(path.join(folder, "tokenizer_config.json"), "utf8"));
  return new Tokenizer(tokenizerJson, config);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const corpus = loadCorpus();
  const families = requested.length ? requested : readdirSync(tokenizerFolder).sort();
  for (const family of families) {
    const tokenizer = loadTokenizer(family);
    const seenKinds = new Set();
    const lines = corpus.map((document, index) => {
      const ids = tokenizer.encode(document.text, { add_special_tokens: false }).ids;
      const decoded = ids.length ? tokenizer.decode(ids, { clean_up_tokenization_spaces: false }) : "";
      const record = { count: ids.length, ids_fnv: fnvIds(ids), decoded_fnv: fnvBytes(Buffer.from(decoded, "utf8")) };
      if (full || index % 8 === 0 || ids.length <= 64) record.ids = ids;
      // The first document of each kind also records what add_special_tokens adds.
      if (!seenKinds.has(document.kind)) {
        seenKinds.add(document.kind);
        record.with_special = tokenizer.encode(document.text, { add_special_tokens: true }).ids;
      }
      return JSON.stringify(record);
    });
    const output = path.join(goldenFolder, `${family}.jsonl.gz`);
    writeFileSync(output, gzipSync(lines.join("\n") + "\n", { level: 9 }));
    const tokens = lines.reduce((sum, line) => sum + JSON.parse(line).count, 0);
    console.log(`${family}: ${corpus.length} documents, ${tokens} tokens -> ${output}`);
  }
}
