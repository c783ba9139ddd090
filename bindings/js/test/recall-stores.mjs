// The cross-runtime store fixture (testdata/recall/stores.json): writes its
// sessions into a store file with the JS store. The JS, Go and Python tests run it:
//   node bindings/js/test/recall-stores.mjs write FILE
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { RecallStore } from "../recall.js";

export const FIXTURE = JSON.parse(readFileSync(new URL("../../../testdata/recall/stores.json", import.meta.url), "utf8"));

/** Writes the fixture's sessions into a new store at file, range by range in its order. */
export async function writeFixture(file, options = { driver: "wasm" }) {
  const s = await RecallStore.open(file, options);
  try {
    FIXTURE.write_order.forEach((round, k) => {
      for (const session of round) s.archive(session, FIXTURE.sessions[session][k]);
    });
  } finally {
    s.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [what, file] = process.argv.slice(2);
  if (what !== "write" || !file) {
    console.error("usage: node recall-stores.mjs write FILE");
    process.exit(2);
  }
  await writeFixture(file);
  console.log("ok");
}
