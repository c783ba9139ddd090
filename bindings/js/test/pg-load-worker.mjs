// One worker of the cross-runtime PostgreSQL load test (the Go test spawns 16 of
// them across Go, Node and Python on one database):
//   node bindings/js/test/pg-load-worker.mjs URL WORKER OPS SEARCHES SESSIONS
// Archives OPS ranges of 4 rows into sessions load-s<k>, each under the session's
// next id (a range another writer took first is a conflict: it asks again), runs
// SEARCHES searches spread over the ops, checks every hit holds every query term
// (ASCII case-insensitively), and prints one JSON line of what it did. It exits 0
// even with errors: the parent judges.
import { openRecallStore } from "../recall.js";

const VOCAB = ["alpha", "Bravo", "CHARLIE", "delta", "echo_1", "fox%trot", "golf", "hotel", "India", "juliet", "kilo", "lima", "Mike", "november", "oscar", "papa"];
const ROLES = ["user", "assistant", "tool"];
const lower = (s) => s.replace(/[A-Z]/g, (c) => c.toLowerCase());

const [url, ...nums] = process.argv.slice(2);
const [worker, ops, searchCount, sessionCount] = nums.map(Number);
if (!url || nums.length !== 4 || ![worker, ops, searchCount, sessionCount].every(Number.isSafeInteger) || sessionCount < 1 || ops < 0) {
  console.error("usage: node pg-load-worker.mjs URL WORKER OPS SEARCHES SESSIONS");
  process.exit(2);
}

/** The archive of op i under range id: 3 messages and the summary row. */
function archiveOf(id, i, tag) {
  const rows = [0, 1, 2].map((j) => {
    const words = [0, 1, 2].map((k) => VOCAB[(worker * 31 + i * 17 + j * 7 + k * 3) % VOCAB.length]);
    const role = ROLES[j];
    const content = `${tag} row${j} ${words.join(" ")}`;
    return { id: `${id}.${j}`, range_id: id, position: i + j, role, reason: "summarized", json: JSON.stringify({ role, content }), text: `${role}\n${content}` };
  });
  rows.push({ id: `${id}.summary`, range_id: id, position: i + 3, role: "user", reason: "summary",
    json: JSON.stringify({ role: "user", content: `summary ${tag}` }), text: `user\nsummary ${tag}` });
  return { range: { id, from_index: i, to_index: i + 3, summary: `summary ${tag}` }, rows };
}

const out = { worker, runtime: "node", archived: [], conflicts: 0, errors: [], searches: 0, search_errors: 0 };
let store;
try {
  store = await openRecallStore(url);
} catch (err) {
  out.errors.push(`open: ${err?.message ?? err}`);
}
if (store) {
  let n = 0;
  for (let i = 0; i < ops; i++) {
    const session = `load-s${(worker * 7 + i * 13) % sessionCount}`;
    const tag = `w${worker}o${i}`;
    for (;;) {
      try {
        const id = await store.nextRangeId(session);
        await store.archive(session, archiveOf(id, i, tag));
        out.archived.push([session, id, tag]);
        break;
      } catch (err) {
        if (err?.code === "invalid_state" && err?.path === "/range/id") {
          out.conflicts++;
          continue;
        }
        out.errors.push(String(err?.message ?? err));
        break;
      }
    }
    const runs = Math.floor((searchCount * (i + 1)) / ops) - Math.floor((searchCount * i) / ops);
    for (let r = 0; r < runs; r++, n++) {
      const session = `load-s${(worker * 11 + n * 5) % sessionCount}`;
      const query = VOCAB[(n * 3) % 16] + (n % 3 === 0 ? ` ${VOCAB[(n * 5 + 1) % 16].toLowerCase()}` : "");
      out.searches++;
      try {
        const { hits } = await store.search(session, query, { limit: 10 });
        const terms = query.split(" ").map(lower);
        if (!hits.every((h) => terms.every((t) => lower(h.text).includes(t)))) out.search_errors++;
      } catch {
        out.search_errors++;
      }
    }
  }
  await store.close();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
