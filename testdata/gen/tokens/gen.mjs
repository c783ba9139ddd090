// gen.mjs writes testdata/tokens.count.json and testdata/tokens.calibrate.json from
// cases.json, with expected results computed independently of the Go core:
//
//   - exact token counts by js-tiktoken, each text also counted by gpt-tokenizer
//     (the run fails if the two disagree); both carry their own vocabularies;
//   - the chat rule, the rough rule and the calibration arithmetic re-implemented
//     here from docs/TOKENS.md.
//
// Usage (check.sh does this in a temporary directory with pinned versions):
//   node gen.mjs <repo root> [out dir]
// Writes the vector files under out dir (default: the repo root).
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { Tiktoken, getEncodingNameForModel } from "js-tiktoken/lite";
import o200kRanks from "js-tiktoken/ranks/o200k_base";
import cl100kRanks from "js-tiktoken/ranks/cl100k_base";
import * as gptO200k from "gpt-tokenizer/encoding/o200k_base";
import * as gptCl100k from "gpt-tokenizer/encoding/cl100k_base";

const root = process.argv[2];
const outRoot = process.argv[3] ?? root;
if (!root) {
  console.error("usage: node gen.mjs <repo root> [out dir]");
  process.exit(2);
}

const tiktoken = {
  o200k_base: new Tiktoken(o200kRanks),
  cl100k_base: new Tiktoken(cl100kRanks),
};
const gpt = { o200k_base: gptO200k, cl100k_base: gptCl100k };
const noSpecial = new Set();

// count: tokens of s as ordinary text (special-token text is not special).
function count(enc, s) {
  if (s === "") return 0;
  const a = tiktoken[enc].encode(s, [], []).length;
  const b = gpt[enc].encode(s, { disallowedSpecial: noSpecial }).length;
  if (a !== b) throw new Error(`${enc}: js-tiktoken counts ${a}, gpt-tokenizer ${b} for ${JSON.stringify(s).slice(0, 80)}`);
  return a;
}

// ---- exact rule (docs/TOKENS.md) ----
// An image whose size cannot be read (the URL images of cases.json) costs 1000; base64
// images are counted by their provider's rule: testdata/tokens.count.images.json.
const IMAGE = 1000;
function exactValue(enc, v) {
  if (typeof v === "string") return count(enc, v);
  if (v === null || v === undefined) return 0;
  return count(enc, JSON.stringify(v));
}
function exactContent(enc, c) {
  if (typeof c === "string") return count(enc, c);
  if (Array.isArray(c)) return c.reduce((n, p) => n + exactPart(enc, p), 0);
  return 0;
}
function exactPart(enc, p) {
  if (typeof p === "string") return count(enc, p);
  switch (p?.type) {
    case "text": case "input_text": case "output_text": return exactValue(enc, p.text);
    case "image_url": case "image": case "input_image": return IMAGE;
    case "thinking": return exactValue(enc, p.thinking);
    case "redacted_thinking": return exactValue(enc, p.data);
    case "tool_use": return 3 + exactValue(enc, p.name) + exactValue(enc, p.input);
    case "tool_result": return exactContent(enc, p.content);
  }
  return exactValue(enc, p);
}
function exactMessage(enc, m) {
  let n = 3;
  for (const [k, v] of Object.entries(m)) {
    if (k === "role") n += exactValue(enc, v);
    else if (k === "name") n += exactValue(enc, v) + 1;
    else if (k === "content") n += exactContent(enc, v);
    else if (k === "tool_calls") for (const c of v) n += 3 + exactValue(enc, c.function?.name) + exactValue(enc, c.function?.arguments);
  }
  return n;
}

// ---- rough rule (docs/TOKENS.md) ----
function cjkDense(r) {
  return r >= 0x1100 && (r <= 0x11ff || (r >= 0x2e80 && r <= 0x2fdf) || (r >= 0x3000 && r <= 0x9fff) ||
    (r >= 0xa960 && r <= 0xa97f) || (r >= 0xac00 && r <= 0xd7af) || (r >= 0xf900 && r <= 0xfaff) ||
    (r >= 0xff00 && r <= 0xffef) || (r >= 0x20000 && r <= 0x3134f));
}
function roughText(s) {
  let dense = 0, other = 0;
  for (const ch of s) cjkDense(ch.codePointAt(0)) ? dense++ : other++;
  return dense + Math.ceil(other / 4);
}
function roughValue(v) {
  if (typeof v === "string") return roughText(v);
  if (v === null || v === undefined) return v === null ? 1 : 0; // "null" is 4 bytes
  return Math.ceil(Buffer.byteLength(JSON.stringify(v), "utf8") / 4);
}
function roughContent(c) {
  if (typeof c === "string") return roughText(c);
  if (Array.isArray(c)) return c.reduce((n, p) => n + roughPart(p), 0);
  return 0;
}
function roughPart(p) {
  if (typeof p === "string") return roughText(p);
  switch (p?.type) {
    case "text": case "input_text": case "output_text": return typeof p.text === "string" ? roughText(p.text) : 0;
    case "image_url": case "image": case "input_image": return IMAGE;
    case "thinking": return typeof p.thinking === "string" ? roughText(p.thinking) : 0;
    case "redacted_thinking": return roughValue(p.data);
    case "tool_use": return 4 + (typeof p.name === "string" ? roughText(p.name) : 0) + roughValue(p.input);
    case "tool_result": return roughContent(p.content);
  }
  return roughValue(p);
}
function roughMessage(m) {
  let n = 4;
  for (const [k, v] of Object.entries(m)) {
    if (k === "content") n += roughContent(v);
    else if (k === "tool_calls") for (const c of v) n += 4 + roughValue(c.function?.name) + roughValue(c.function?.arguments);
  }
  return n;
}

// ---- ops ----
function encodingFor(req) {
  let enc = req.encoding ?? req.config?.tokens?.encoding ?? "rough";
  if (enc === "auto") {
    // js-tiktoken's own model table, after dropping a provider prefix.
    const model = (req.config?.model?.name ?? "").split("/").pop();
    try { enc = getEncodingNameForModel(model); } catch { enc = "rough"; }
  }
  if (!["rough", "o200k_base", "cl100k_base"].includes(enc)) throw new Error(`case needs an explicit want: encoding ${enc}`);
  return enc;
}
const perMessage = (enc, msgs) => msgs.map((m) => (enc === "rough" ? roughMessage(m) : exactMessage(enc, m)));
const priming = (enc, msgs) => (enc === "rough" || msgs.length === 0 ? 0 : 3);

// The priors of docs/TOKENS.md ("Priors"), written from that table: the factor of a
// model family under an encoding, used when config.tokens.calibration is not given.
const PRIORS = {
  claude: { rough: 1.66, o200k_base: 1.36, cl100k_base: 1.36 },
  "claude-4.7": { rough: 2.24, o200k_base: 1.84, cl100k_base: 1.84 },
  gemini: { rough: 1.0 },
  deepseek: { rough: 1.2, o200k_base: 1.1, cl100k_base: 1.1 },
};
function family(model) {
  const m = (model ?? "").toLowerCase();
  const at = m.indexOf("claude");
  if (at >= 0) {
    // the first one or two numbers of at most two digits after "claude"
    const nums = [];
    for (const f of m.slice(at + 6).split(/[^0-9]+/).filter(Boolean)) {
      if (f.length > 2) { if (nums.length) break; continue; }
      nums.push(Number(f));
      if (nums.length === 2) break;
    }
    const [major, minor = 0] = nums;
    return nums.length && (major < 4 || (major === 4 && minor < 7)) ? "claude" : "claude-4.7";
  }
  if (m.includes("gemini")) return "gemini";
  if (m.includes("deepseek")) return "deepseek";
  return "";
}
function calibrationOf(req, enc) {
  const given = req.config?.tokens?.calibration;
  if (given !== undefined) return [given, "config"];
  const fam = family(req.config?.model?.name);
  const f = PRIORS[fam]?.[enc];
  return f === undefined ? [1, "none"] : [f, `prior:${fam}`];
}

function tokensCount(req) {
  const enc = encodingFor(req);
  const [cal, source] = calibrationOf(req, enc);
  const per = perMessage(enc, req.messages).map((n) => (cal === 1 ? n : Math.round(n * cal)));
  const total = per.reduce((a, b) => a + b, 0) + priming(enc, req.messages);
  return { encoding: enc, calibration: cal, calibration_source: source, total, per_message: per };
}

function tokensCalibrate(req) {
  const enc = encodingFor(req);
  const per = perMessage(enc, req.messages);
  const estimate = per.reduce((a, b) => a + b, 0) + priming(enc, req.messages);
  let method = "ratio", delta = 0, factor, overhead = req.fixed_overhead ?? 0;
  if (req.baseline) {
    method = "delta";
    delta = per.slice(req.baseline.message_count).reduce((a, b) => a + b, 0);
    factor = (req.prompt_tokens - req.baseline.prompt_tokens) / delta;
  } else {
    factor = (req.prompt_tokens - overhead) / estimate;
  }
  factor = Math.round(factor * 1e4) / 1e4;
  if (method === "delta") overhead = req.prompt_tokens - Math.round(factor * estimate);
  return { encoding: enc, method, factor, estimate, estimate_delta: delta, prompt_tokens: req.prompt_tokens, fixed_overhead: overhead };
}

const run = { "tokens.count": tokensCount, "tokens.calibrate": tokensCalibrate };

const spec = JSON.parse(readFileSync(join(root, "testdata/gen/tokens/cases.json"), "utf8"));
for (const file of spec.files) {
  const cases = file.cases.map((c) => ({
    name: c.name,
    request: c.request,
    want: c.want ?? { result: run[file.op](c.request) },
  }));
  const out = join(outRoot, file.path);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify({ _comment: file._comment, op: file.op, cases }, null, 1) + "\n");
  console.log(`wrote ${file.path}: ${cases.length} cases`);
}
