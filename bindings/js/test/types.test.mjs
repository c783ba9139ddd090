// index.d.ts compiles under `tsc --strict` against a file that uses (and misuses) it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT } from "./helpers.mjs";

const tsc = path.join(ROOT, "node_modules", "typescript", "bin", "tsc");

function runTsc(file, skipLibCheck = false) {
  try {
    execFileSync(process.execPath, [tsc, "--strict", "--noEmit", "--target", "es2022", "--lib", "es2022,dom",
      "--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", String(skipLibCheck), file], { cwd: ROOT, encoding: "utf8" });
    return "";
  } catch (err) {
    return String(err.stdout) + String(err.stderr);
  }
}

test("tsc --strict --noEmit accepts the usage file (and every @ts-expect-error is needed)", () => {
  assert.ok(existsSync(tsc), "typescript is installed (bindings/js/test.sh runs npm ci)");
  const out = runTsc(path.join("bindings", "js", "test", "types-check.ts"));
  assert.equal(out, "", out);
});

test("the real openai and @anthropic-ai/sdk clients fit the summarizers' client types (tsc --strict)", () => {
  // Their own .d.ts are theirs to check (skipLibCheck): ours are checked against them.
  const out = runTsc(path.join("bindings", "js", "test", "types-sdk-check.ts"), true);
  assert.equal(out, "", out);
});

test("tsc catches a type error through the d.ts (the check is not vacuous)", (t) => {
  const dir = mkdtempSync(path.join(ROOT, "bindings", "js", "test", ".tmp-types-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, "wrong.ts");
  writeFileSync(file, `import { Compactor } from "ctxcompact";\nconst c = await Compactor.create();\nconst n: string = c.info().ops;\nexport { n };\n`);
  const out = runTsc(path.relative(ROOT, file));
  assert.match(out, /TS2322/, out);
});
