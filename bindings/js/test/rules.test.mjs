// validate()'s provider rules (docs/RULES.md): the provider option names the rule
// set of AI SDK messages; a bad one is invalid_request at /provider.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Compactor } from "../index.js";

const c = await Compactor.create();
const unsigned = [
  { role: "user", content: "Port it." },
  { role: "assistant", content: [{ type: "reasoning", text: "read a" }, { type: "text", text: "done" }] },
];

test("validate() checks AI SDK messages under the provider named", () => {
  assert.deepEqual(c.validate(unsigned, { format: "ai-sdk" }), { ok: true, problems: [] });
  const res = c.validate(unsigned, { format: "ai-sdk", provider: "anthropic" });
  assert.equal(res.ok, false);
  assert.deepEqual(res.problems.map((p) => [p.code, p.path]), [["thinking_signature_missing", "/messages/1/content/0"]]);
});

test("validate() refuses a provider it has no rules for", () => {
  assert.throws(() => c.validate(unsigned, { format: "ai-sdk", provider: "mistral" }), (e) => e.code === "invalid_request" && e.path === "/provider");
  assert.throws(() => c.validate(unsigned, { provider: 1 }), (e) => e.code === "invalid_request" && e.path === "/provider");
});

test("validate() takes the AI SDK provider from the config: the compactor's, or the call's merged over it", async () => {
  const anthropic = await Compactor.create({ config: { model: { provider: "anthropic" } } });
  assert.deepEqual(anthropic.validate(unsigned, { format: "ai-sdk" }).problems.map((p) => p.code), ["thinking_signature_missing"]);
  // the call's config wins over the compactor's; an explicit provider over both
  assert.deepEqual(anthropic.validate(unsigned, { format: "ai-sdk", config: { model: { provider: "openrouter" } } }), { ok: true, problems: [] });
  assert.deepEqual(c.validate(unsigned, { format: "ai-sdk", config: { model: { provider: "anthropic" } }, provider: "openai" }), { ok: true, problems: [] });
  assert.throws(() => c.validate(unsigned, { config: { model: { provider: 7 } } }), (e) => e.code === "invalid_config" && e.path === "/config/model/provider");
});
