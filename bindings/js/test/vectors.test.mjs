// The shared vectors in testdata/*.json (runner algorithm: testdata/README.md).
// For each file and case: send {"op": file.op, ...case.request} through the raw call
// path; compare the parsed result with want.result (deep equality) or, for errors,
// only want.error.code and want.error.path. Case id: <op>/<file>/<name>.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { Compactor } from "../index.js";
import { ROOT } from "./helpers.mjs";

const dir = path.join(ROOT, "testdata");
const files = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json")).sort() : [];

test("testdata/ holds vector files", () => {
  assert.ok(files.length > 0, `no vector files in ${dir}`);
});

const compactor = await Compactor.create();

for (const file of files) {
  const suite = JSON.parse(readFileSync(path.join(dir, file), "utf8"));
  const base = file.replace(/\.json$/, "");
  for (const c of suite.cases) {
    test(`${suite.op}/${base}/${c.name}`, () => {
      // request_json is sent as written (duplicate keys, which a parsed object drops).
      const request = c.request_json !== undefined
        ? `{"op":${JSON.stringify(suite.op)},${c.request_json.trim().slice(1)}`
        : JSON.stringify({ op: suite.op, ...c.request });
      const env = JSON.parse(compactor.callRaw(request));
      if ("error" in c.want) {
        assert.ok(env.error, `want error ${c.want.error.code}, got result ${JSON.stringify(env.result)?.slice(0, 400)}`);
        assert.deepEqual({ code: env.error.code, path: env.error.path }, { code: c.want.error.code, path: c.want.error.path });
      } else {
        assert.ok(!env.error, `want a result, got error ${JSON.stringify(env.error)}`);
        assert.deepEqual(env.result, c.want.result);
      }
    });
  }
}
