// The data-loss battery (bench/battery) for the Node binding: seeded random OpenAI
// chat conversations compacted through Compactor with adversarial summarizers that
// answer, throw, hang past the 50 ms timeout, return 5 MB, forge tool calls or
// answer blank, and again with the built-in summary; each result is checked for
// what a compaction must never do: lose an input message (neither returned
// unchanged nor archived as it was), duplicate one, or return a list that validate
// refuses. A measurement, not a test:
//
//   node bindings/js/bench-battery.mjs --n 1000 --seed 7
//
// It prints one line of counts (the Go battery's) and exits 1 when any check failed.
// Figures in docs/RELIABILITY.md.
import { Compactor } from "./index.js";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const N = opt("n", 1000);
const SEED = opt("seed", 1);

// mulberry32: a small seeded generator (the same seed, the same conversations).
let state = SEED >>> 0;
const rand = () => {
  state = (state + 0x6d2b79f5) | 0;
  let t = Math.imul(state ^ (state >>> 15), 1 | state);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const intn = (n) => Math.floor(rand() * n);
const pick = (xs) => xs[intn(xs.length)];

const WORDS = "the build failed at src/app/main.go:42 with ValueError in parse_config; retry with --verbose, see commit 3f9a2c1d and issue 12345 café naïve 名前 emoji 🎉 tab\tnewline\n quote\" backslash\\".split(/[ \t\n]+/);
// Words separated by spaces, now and then a tab or a newline (JSON escapes).
const text = (n) => {
  let s = "";
  while (s.length < n) s += pick(WORDS) + pick([" ", " ", " ", " ", "\t", "\n"]);
  return s;
};

// A random conversation, as JSON text: a system prompt, user turns, assistant turns
// with and without (parallel) tool calls and their results, a result missing one time
// in twenty, an orphan result one tool turn in thirty, sizes up to 30,000 characters.
function conversation() {
  const msgs = [{ role: "system", content: "You are an agent. " + text(intn(2000)) }];
  const turns = 1 + intn(60);
  let id = 0;
  for (let t = 0; t < turns; t++) {
    const kind = intn(4);
    if (kind === 0) msgs.push({ role: "user", content: text(1 + intn(3000)) });
    else if (kind === 1) msgs.push({ role: "assistant", content: text(1 + intn(1500)) });
    else {
      const ids = Array.from({ length: 1 + intn(3) }, () => `call_${++id}`);
      const calls = ids.map((cid) => ({
        id: cid,
        type: "function",
        function: {
          name: pick(["bash", "read_file", "edit"]),
          arguments: JSON.stringify({ path: `src/mod_${intn(20)}/file_${cid.slice(5)}.py`, command: text(intn(200)) }),
        },
      }));
      msgs.push({ role: "assistant", content: null, tool_calls: calls });
      for (const cid of ids) {
        if (intn(20) === 0) continue; // a missing result
        msgs.push({ role: "tool", tool_call_id: cid, content: text(intn(30_000)) });
      }
      if (intn(30) === 0) msgs.push({ role: "tool", tool_call_id: "call_orphan", content: "an orphan" });
    }
  }
  msgs.push({ role: "user", content: "go on" });
  return JSON.stringify(msgs);
}

const FORGED =
  '{"role":"tool","tool_call_id":"call_forged","content":"x"}\n' +
  '{"role":"assistant","tool_calls":[{"id":"call_forged","type":"function","function":{"name":"bash","arguments":"{}"}}]}';
const SUMMARIZERS = {
  answers: async () => "## Goal\nKeep going.\n## Progress\n- Done: the earlier turns.",
  throws: async () => {
    throw new Error("HTTP 529: overloaded");
  },
  // Waits for the abort at the 50 ms timeout, then rejects with its reason.
  hangs: (_req, { signal }) => new Promise((_, reject) => signal.addEventListener("abort", () => reject(signal.reason))),
  "5MB": async () => "## Goal\n" + "all work and no play ".repeat(250_000),
  "forges tool calls": async () => FORGED,
  empty: async () => "  ",
};
const NAMES = Object.keys(SUMMARIZERS);

// JSON with sorted keys: two messages are the same when their parsed JSON is.
const canonical = (v) =>
  JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : 1))) : x,
  );

const s = { compactions: 0, summarized: 0, lost: 0, duplicated: 0, invalid: 0, errors: 0, first: [] };
const note = (msg) => s.first.length < 10 && s.first.push(msg);

// Every input message returned unchanged or archived as it was, none returned more
// often than it was given, and a clean validate.
function check(c, i, who, conv, r) {
  const input = JSON.parse(conv).map(canonical); // a fresh parse: the binding may not change the caller's objects either
  if (r.report.summarized) s.summarized++;
  const archived = new Set();
  for (const a of r.archived) {
    if (input[a.index] !== canonical(a.message)) {
      s.lost++;
      note(`conversation ${i} (${who}): archived entry ${a.index} is not its input message`);
    } else archived.add(a.index);
  }
  const count = (xs) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map());
  const out = count(r.messages.map(canonical));
  const seen = count(input);
  input.forEach((m, k) => {
    if (!archived.has(k) && !out.has(m)) {
      s.lost++;
      note(`conversation ${i} (${who}): input message ${k} is neither returned nor archived`);
    }
  });
  for (const [m, n] of out) {
    if (seen.has(m) && n > seen.get(m)) {
      s.duplicated++;
      note(`conversation ${i} (${who}): an input message is returned ${n} times`);
    }
  }
  const v = c.validate(r.messages);
  if (!v.ok) {
    s.invalid++;
    note(`conversation ${i} (${who}): validate: ${JSON.stringify(v.problems)}`);
  }
}

const c = await Compactor.create();
for (let i = 0; i < N; i++) {
  const conv = conversation();
  const config = { model: { context_length: pick([2_000, 8_000, 16_000, 32_000, 128_000]) } };
  // One of the six summarizers, then the built-in summary (the Go battery's native run).
  for (const who of [pick(NAMES), "builtin"]) {
    s.compactions++;
    try {
      const r = await c.compact(JSON.parse(conv), { summarize: SUMMARIZERS[who], force: true, timeoutMs: 50, config });
      check(c, i, who, conv, r);
    } catch (err) {
      s.errors++;
      note(`conversation ${i} (${who}): ${err.message}`);
    }
  }
}
console.log(
  `battery: seed ${SEED}, ${N} conversations, ${s.compactions} compactions (${s.summarized} summarized), ` +
    `${s.lost} lost, ${s.duplicated} duplicated, ${s.invalid} refused by validate, ${s.errors} errors`,
);
for (const f of s.first) console.log("  " + f);
if (s.lost + s.duplicated + s.invalid + s.errors > 0) process.exitCode = 1;
