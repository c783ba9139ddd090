// session.run transcripts (docs/SESSION.md, testdata/session/transcripts.json):
// each transcript is replayed through ContextEngine's own loop (the one its
// methods run: async for compress, sync otherwise) with a scripted performer. The
// effects asked for must be the transcript's, in order; the answers go back as the
// loop makes them (a summarizer's failure with its code, a store's error as
// "store"); the result, the state, a failure's message and a cancellation must be
// the transcript's.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { Compactor, _session } from "../index.js";
import { ROOT } from "./helpers.mjs";

const FILE = path.join(ROOT, "testdata", "session", "transcripts.json");
const { kSession, SummaryFailure } = _session;
const c = await Compactor.create();

/** A store the scripted performer stands in for (lossless engines need one). */
const NO_STORE = {
  nextRangeId() { throw new Error("the scripted performer answers"); },
  archive() { throw new Error("the scripted performer answers"); },
  search() { throw new Error("the scripted performer answers"); },
  expand() { throw new Error("the scripted performer answers"); },
};

/** A store's error, as a store throws it. */
class StoreError extends Error {}

const transcripts = existsSync(FILE) ? JSON.parse(readFileSync(FILE, "utf8")).transcripts : [];

test("the transcripts are there", () => {
  assert.ok(transcripts.length > 0, `${FILE} holds no transcripts`);
});

for (const t of transcripts) {
  test(`transcript ${t.name}`, async () => {
    const engine = c.engine({ state: t.state, store: NO_STORE, sessionId: "transcript" });
    assert.deepEqual(engine.state, t.state, "the restored state is the transcript's");
    for (const [i, step] of t.steps.entries()) {
      const where = `${t.name} step ${i} (${step.event})`;
      const ac = new AbortController();
      let k = 0;
      // A mismatch is kept here too: the loop answers a performer's error, it must not hide one.
      const mismatches = [];
      // The next effect of the script, checked against got (an effect, or an
      // archive's part: its range and rows), and its answer.
      const answer = (type, got, part) => {
        const want = step.effects[k++];
        try {
          assert.ok(want !== undefined, `${where}: effect ${k - 1} is one too many: ${JSON.stringify(got).slice(0, 300)}`);
          assert.deepEqual(got, part ? want.effect.archive : want.effect, `${where}: effect ${k - 1}`);
        } catch (err) {
          mismatches.push(err);
          throw err;
        }
        if (want.cancel) {
          ac.abort();
          throw ac.signal.reason;
        }
        if ("error" in want.answer) {
          const { code, message } = want.answer.error;
          if (type === "summarize") throw new SummaryFailure(code, message);
          assert.equal(code, "store", `${where}: a store effect fails with code store`);
          throw new StoreError(message);
        }
        return want.answer.ok;
      };
      // An archive is written as a store writes it: part after part, the
      // iterable left at the first failure.
      const perform = (effect) => {
        if (effect.type !== "archive") return answer(effect.type, effect, false);
        for (const part of effect.parts) answer("archive", part, true);
        return null;
      };
      const before = engine.state;
      let result;
      let error;
      try {
        result = await engine[kSession](step.event, step.fields, perform, ac.signal);
      } catch (err) {
        error = err;
      }
      if (mismatches.length > 0) throw mismatches[0];
      assert.equal(k, step.effects.length, `${where}: ${step.effects.length - k} effects not asked for`);
      const end = step.end;
      if (end.failed) {
        assert.ok(error !== undefined, `${where}: should fail with ${end.failed.message}`);
        assert.ok(error instanceof StoreError, `${where}: the store's own error surfaces, got ${error}`);
        assert.equal(error.message, end.failed.message, where);
        assert.deepEqual(engine.state, before, `${where}: a failed sequence records nothing`);
      } else if (end.cancelled) {
        assert.ok(error !== undefined && error.name === "AbortError", `${where}: should be cancelled, got ${error}`);
        assert.deepEqual(engine.state, before, `${where}: a cancelled sequence records nothing`);
      } else {
        if (error !== undefined) throw error;
        assert.deepEqual(result, end.result, `${where}: result`);
        assert.deepEqual(engine.state, end.state, `${where}: state`);
        assert.deepEqual(engine.getStatus(), end.status, `${where}: status`);
      }
    }
  });
}
