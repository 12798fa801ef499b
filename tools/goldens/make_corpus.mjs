// Builds the tokenizer test corpus: documents of the kinds that break
// tokenizers (prose, code, CJK, right-to-left scripts, Indic scripts with
// combining signs, emoji sequences, decomposed accents, whitespace runs,
// numbers, special-token strings, very long words), written to
// tests/tokenizer/golden/corpus.jsonl.gz as {"kind", "text"} lines.
//
// Every byte is either written by this project (its own sources and docs) or
// generated here from code-point inventories with a seeded generator, so the
// corpus carries no third-party text. It is built once and committed: the
// goldens are computed from the committed file, not from a rebuild.
//
// Usage: node make_corpus.mjs [--target-bytes N]   (from tools/goldens)
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { gzipSync } from "node:zlib";
import path from "node:path";

const top = path.resolve(import.meta.dirname, "../..");
const targetIndex = process.argv.indexOf("--target-bytes");
const targetBytes = targetIndex > 0 ? Number(process.argv[targetIndex + 1]) : 2_300_000;

// mulberry32: small, fast, and identical on every Node version.
function generator(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = generator(20261130);
const integer = (low, high) => low + Math.floor(random() * (high - low + 1));
const pick = (items) => items[Math.floor(random() * items.length)];
const zipfPick = (items) => items[Math.min(items.length - 1, Math.floor(items.length * random() ** 3))];
const codePoint = (low, high) => String.fromCodePoint(integer(low, high));
const repeat = (count, make) => Array.from({ length: count }, make).join("");

// Words ordered roughly by frequency, so zipfPick gives prose-like repetition.
const englishWords = `the of and to a in is it you that he was for on are with as I his they be at one have this from
or had by hot word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has look more
day could go come did number sound no most people my over know water than call first who may down side been now
find any new work part take get place made live where after back little only round man year came show every good me
give our under name very through just form sentence great think say help low line differ turn cause much mean before
move right boy old too same tell does set three want air well also play small end put home read hand port large spell
add even land here must big high such follow act why ask men change went light kind off need house picture try us
again animal point mother world near build self earth father head stand own page should country found answer school
grow study still learn plant cover food sun four between state keep eye never last let thought city tree cross farm
hard start might story saw far sea draw left late run don't while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both mark often letter until
mile river car feet care second book carry took science eat room friend began idea fish mountain stop once base hear
horse cut sure watch color face wood main enough plain girl usual young ready above ever red list though feel talk
bird soon body dog family direct pose leave song measure door product black short numeral class wind question happen
complete ship area half rock order fire south problem piece told knew pass since top whole king space heard best hour
better true during hundred five remember step early hold west ground interest reach fast verb sing listen six table
travel less morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine
note wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week
final gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce fact street
inch multiply nothing course stay wheel full force blue object decide surface deep moon island foot system busy test
record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought
heat snow tire bring yes distant fill east paint language among gateway replica cache prefix token engine request
latency throughput scheduler kernel tensor batch prompt decode prefill memory eviction queue router session`.split(/\s+/);
const contractions = ["it's", "don't", "we're", "they've", "I'm", "you'll", "she'd", "can't", "won't", "isn't",
  "IT'S", "We'Re", "THEY'LL", "o'clock", "rock'n'roll", "'tis"];
const properNouns = ["Alice", "Bob", "Kubernetes", "McDonald", "iPhone", "O'Brien", "São Paulo", "Zürich",
  "Ångström", "naïve", "café", "résumé", "Müller", "Dvořák", "Łódź", "Ελλάδα", "Москва", "TCP/IP", "HTTP/2", "vLLM",
  "SGLang", "NVIDIA", "H100", "GPT-4o", "C++20", "x86_64"];

function englishSentence() {
  const words = [];
  const length = integer(4, 24);
  for (let index = 0; index < length; ++index) {
    const roll = random();
    if (roll < 0.05) words.push(pick(contractions));
    else if (roll < 0.09) words.push(pick(properNouns));
    else if (roll < 0.11) words.push(String(integer(0, 100000)));
    else words.push(zipfPick(englishWords));
    if (random() < 0.08) words[words.length - 1] += pick([",", ";", ":", " -", " —", "'s"]);
  }
  let sentence = words.join(" ");
  sentence = sentence[0].toUpperCase() + sentence.slice(1);
  if (random() < 0.1) sentence = `"${sentence}"`;
  if (random() < 0.05) sentence = `(${sentence})`;
  return sentence + pick([".", ".", ".", "?", "!", "...", "?!"]);
}

function englishProse() {
  const paragraphs = [];
  for (let paragraph = integer(2, 8); paragraph > 0; --paragraph) {
    paragraphs.push(repeat(integer(2, 9), () => englishSentence() + " ").trimEnd());
  }
  return paragraphs.join(pick(["\n\n", "\n", "\n\n\n", "\r\n\r\n"]));
}

// Scripts as code-point ranges plus their own punctuation and separators.
const scripts = {
  chinese: { letters: [[0x4e00, 0x9fa5]], word: [1, 4], separator: "", punctuation: ["，", "。", "、", "：", "；", "！", "？", "「", "」"] },
  japanese: { letters: [[0x3041, 0x3093], [0x30a1, 0x30f3], [0x4e00, 0x9fa5]], word: [1, 6], separator: "", punctuation: ["。", "、", "・", "ー", "！"] },
  korean: { letters: [[0xac00, 0xd7a3]], word: [1, 5], separator: " ", punctuation: [".", ",", "?"] },
  arabic: { letters: [[0x0621, 0x064a]], marks: [[0x064b, 0x0652]], word: [2, 8], separator: " ", punctuation: ["،", "؛", "؟", "."] },
  hebrew: { letters: [[0x05d0, 0x05ea]], marks: [[0x05b0, 0x05bc]], word: [2, 7], separator: " ", punctuation: [".", ",", "״", "׳"] },
  devanagari: { letters: [[0x0915, 0x0939]], marks: [[0x093e, 0x094d]], word: [2, 7], separator: " ", punctuation: ["।", "॥", ","] },
  cyrillic: { letters: [[0x0430, 0x044f], [0x0410, 0x042f]], word: [2, 10], separator: " ", punctuation: [".", ",", "—", "«", "»"] },
  greek: { letters: [[0x03b1, 0x03c9]], word: [2, 10], separator: " ", punctuation: [".", ",", ";", "·"] },
  thai: { letters: [[0x0e01, 0x0e2e]], marks: [[0x0e31, 0x0e3a]], word: [2, 8], separator: "", punctuation: [" ", "ๆ"] },
  bengali: { letters: [[0x0995, 0x09b9]], marks: [[0x09be, 0x09cc]], word: [2, 6], separator: " ", punctuation: ["।", ","] },
};

function scriptWord(script) {
  let word = "";
  for (let count = integer(...script.word); count > 0; --count) {
    const [low, high] = pick(script.letters);
    word += codePoint(low, high);
    if (script.marks && random() < 0.4) word += codePoint(...pick(script.marks));
  }
  return word;
}

function scriptText(name) {
  const script = scripts[name];
  let text = "";
  for (let count = integer(20, 300); count > 0; --count) {
    text += scriptWord(script);
    const roll = random();
    if (roll < 0.12) text += pick(script.punctuation);
    if (roll > 0.97) text += String(integer(1, 2030));
    if (roll > 0.95 && roll <= 0.97) text += " " + zipfPick(englishWords) + " ";
    text += script.separator;
    if (random() < 0.02) text += "\n";
  }
  return text;
}

const skinTones = [0x1f3fb, 0x1f3fc, 0x1f3fd, 0x1f3fe, 0x1f3ff].map((c) => String.fromCodePoint(c));
const emojiBases = ["😀", "😂", "🥲", "🤖", "👍", "👋", "🧑", "👩", "👨", "🏳", "❤", "🔥", "✨", "🚀", "🎉", "🙏", "💡", "🌍", "🍕", "⚽"];
function emojiText() {
  let text = "";
  for (let count = integer(10, 120); count > 0; --count) {
    const roll = random();
    if (roll < 0.3) text += pick(emojiBases);
    else if (roll < 0.45) text += pick(["👋", "👍", "🧑", "👩"]) + pick(skinTones);
    else if (roll < 0.6) text += pick(["👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🧑🏽‍🚀", "❤️‍🔥", "👁️‍🗨️", "🐻‍❄️"]);
    else if (roll < 0.7) text += String.fromCodePoint(0x1f1e6 + integer(0, 25), 0x1f1e6 + integer(0, 25));
    else if (roll < 0.78) text += pick(["1️⃣", "#️⃣", "*️⃣", "©️", "™️", "☺︎"]);
    else text += " " + zipfPick(englishWords) + pick([" ", "", "! ", ". "]);
  }
  return text;
}

// Decomposed and stacked combining marks: the NFC normaliser must compose
// what composes and leave the rest in canonical order.
function combiningText() {
  let text = "";
  for (let count = integer(20, 200); count > 0; --count) {
    let word = "";
    for (let letters = integer(1, 8); letters > 0; --letters) {
      word += pick("aeiouncAEIOUNCsSzZyY".split(""));
      for (let marks = integer(0, 3); marks > 0; --marks) word += codePoint(0x0300, 0x036f);
    }
    text += word + pick([" ", " ", ", ", ". ", "\n"]);
  }
  return text;
}

const spaces = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2009", "\u2028", "\u200b", "\v", "\f", "\u0085"];
function whitespaceText() {
  let text = "";
  for (let count = integer(10, 120); count > 0; --count) {
    text += zipfPick(englishWords);
    const run = integer(1, 40);
    text += random() < 0.5 ? pick(spaces).repeat(run) : repeat(run, () => pick(spaces));
  }
  return text;
}

function numberText() {
  const forms = [
    () => String(integer(0, 9)),
    () => String(integer(0, 999999999)),
    () => `${integer(0, 999)}.${integer(0, 99999)}`,
    () => integer(1, 999).toLocaleString("en-US") + "," + String(integer(0, 999)).padStart(3, "0"),
    () => `${integer(1990, 2030)}-${String(integer(1, 12)).padStart(2, "0")}-${String(integer(1, 28)).padStart(2, "0")}`,
    () => `+1 (${integer(200, 999)}) ${integer(200, 999)}-${integer(1000, 9999)}`,
    () => "0x" + integer(0, 0xffffffff).toString(16),
    () => `${integer(1, 100)}%`,
    () => `$${integer(1, 99999)}.${integer(10, 99)}`,
    () => "1".repeat(integer(4, 40)),
    () => String.fromCodePoint(...Array.from({ length: integer(1, 6) }, () => 0x0660 + integer(0, 9))),
    () => String.fromCodePoint(...Array.from({ length: integer(1, 6) }, () => 0xff10 + integer(0, 9))),
    () => pick(["½", "²", "³", "⅓", "Ⅻ", "①", "𝟘𝟙𝟚"]),
  ];
  return repeat(integer(20, 200), () => pick(forms)() + pick([" ", ", ", "\n", "; ", " and ", "/"]));
}

const specialStrings = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
  "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>",
  "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜end▁of▁sentence｜>",
  "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<unk>", "<pad>",
  "<|start|>", "<|message|>", "<|channel|>", "<|end|>", "<|return|>", "<|call|>",
  "<|im_start", "im_end|>", "<|", "|>", "< |im_start| >"];
function specialTokenText() {
  let text = "";
  for (let count = integer(10, 80); count > 0; --count) {
    text += pick(["", " ", "\n", "  "]) + pick(specialStrings) + pick(["", " ", "\n"]);
    text += repeat(integer(0, 6), () => zipfPick(englishWords) + " ").trimEnd();
  }
  return text;
}

function longWordText() {
  const makers = [
    () => pick("abcxyz".split("")).repeat(integer(50, 3000)),
    () => repeat(integer(50, 800), () => zipfPick(englishWords)),
    () => Buffer.from(repeat(integer(100, 2000), () => String.fromCharCode(integer(0, 255))), "latin1").toString("base64"),
    () => "https://example.com/" + repeat(integer(5, 60), () => zipfPick(englishWords) + pick(["/", "-", "_", "?q=", "&x=", "#"])),
    () => "-".repeat(integer(10, 500)) + "=".repeat(integer(10, 200)) + "*".repeat(integer(3, 100)),
    () => scriptWord(scripts.chinese).repeat(integer(20, 300)),
    () => "ﷺ".repeat(integer(10, 100)) + "ǅ".repeat(integer(10, 50)) + "ß".repeat(integer(5, 50)),
  ];
  return repeat(integer(1, 4), () => pick(makers)() + pick([" ", "\n", ""]));
}

function mixedText() {
  const kinds = [englishSentence, () => scriptText(pick(Object.keys(scripts))), emojiText, numberText, combiningText];
  return repeat(integer(3, 12), () => pick(kinds)() + pick([" ", "\n", "", "\t"]));
}

// This project's own sources and docs, in pieces the size of a request.
function ownFiles() {
  const files = execFileSync("git", ["ls-files"], { cwd: top, encoding: "utf8" })
    .split("\n")
    .filter((file) => /\.(cpp|hpp|sh|md|txt|yaml|mjs|json|cmake)$/.test(file) && !file.startsWith("tools/goldens/package"));
  const documents = [];
  for (const file of files.sort()) {
    const text = readFileSync(path.join(top, file), "utf8");
    const kind = file.endsWith(".md") ? "prose" : "code";
    for (let start = 0; start < text.length; start += 6000) {
      documents.push({ kind, text: text.slice(start, start + 6000) });
    }
  }
  return documents;
}

const generated = [
  ["prose", englishProse, 32],
  ["cjk", () => scriptText(pick(["chinese", "japanese", "korean"])), 10],
  ["rtl", () => scriptText(pick(["arabic", "hebrew"])), 6],
  ["indic", () => scriptText(pick(["devanagari", "bengali", "thai"])), 6],
  ["other-scripts", () => scriptText(pick(["cyrillic", "greek"])), 4],
  ["emoji", emojiText, 5],
  ["combining", combiningText, 4],
  ["whitespace", whitespaceText, 5],
  ["numbers", numberText, 5],
  ["special-tokens", specialTokenText, 5],
  ["long-words", longWordText, 4],
  ["mixed", mixedText, 8],
];
const totalWeight = generated.reduce((sum, [, , weight]) => sum + weight, 0);

const documents = ownFiles();
let bytes = documents.reduce((sum, document) => sum + Buffer.byteLength(document.text), 0);
while (bytes < targetBytes) {
  let roll = random() * totalWeight;
  const [kind, make] = generated.find(([, , weight]) => (roll -= weight) < 0) ?? generated[0];
  const text = make();
  documents.push({ kind, text });
  bytes += Buffer.byteLength(text);
}
// Interleave own files and generated text so any slice of the corpus has both.
documents.sort((left, right) => (left.text.length % 7) - (right.text.length % 7));

const output = path.join(top, "tests/tokenizer/golden/corpus.jsonl.gz");
mkdirSync(path.dirname(output), { recursive: true });
writeFileSync(output, gzipSync(documents.map((document) => JSON.stringify(document)).join("\n") + "\n", { level: 9 }));
const kinds = {};
for (const document of documents) kinds[document.kind] = (kinds[document.kind] ?? 0) + Buffer.byteLength(document.text);
console.log(`${documents.length} documents, ${bytes} bytes`, kinds);
