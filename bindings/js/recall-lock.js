// The lock every runtime's recall store takes around each use of a file (docs/RECALL.md
// "Concurrency"): the directory `<absolute path>.lock`, made with mkdir (atomic), with
// a file `owner` in it naming its holder ({pid, host, runtime, at}), removed after.
// A waiter takes over a lock whose holder on this host no longer runs, or one older
// than STALE_AFTER_MS (by its owner's time, else the directory's), so a writer killed
// with the lock held does not stop every process until a person removes it.
// Waiting sleeps (Atomics.wait), it never spins, and never past the timeout.

import { mkdirSync, readFileSync, rmdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { CompactError } from "./errors.js";

/** A lock older than this is taken over whatever its holder (no runtime holds it for more than one transaction). */
export const STALE_AFTER_MS = 30000;

const sleeper = new Int32Array(new SharedArrayBuffer(4));

/** The clock of every wait for a lock (tests replace `now` and `sleep`). */
export const lockClock = {
  now: () => Date.now(),
  /** Sleeps ms milliseconds, synchronously, without spinning. */
  sleep: (ms) => { Atomics.wait(sleeper, 0, 0, ms); },
};

/** Test hooks: `beforeCommit` runs in a store's write transaction, before its COMMIT. */
export const testHooks = { beforeCommit: null };

let host;
const hostName = () => (host ??= hostname());

/** Whether a process with pid runs on this host (true when it cannot be told). */
function processRuns(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err?.code !== "ESRCH";
  }
}

export class DirLock {
  /**
   * @param {string} dir the lock directory, `<absolute path of the file>.lock`
   * @param {number} timeoutMs how long a take waits
   */
  constructor(dir, timeoutMs) {
    this.dir = dir;
    this.timeoutMs = timeoutMs;
    this.depth = 0;
  }

  /**
   * Waits until attempt() reports the lock taken (true), sleeping between tries:
   * a stale lock is broken at once, and after timeoutMs an error names the lock and
   * its holder. Returns the number of attempts.
   */
  waitFor(attempt) {
    const deadline = lockClock.now() + this.timeoutMs;
    let delay = 1;
    for (let n = 1; ; n++) {
      if (attempt()) return n;
      if (this.breakStale()) continue;
      const left = deadline - lockClock.now();
      if (left <= 0) {
        throw new CompactError("internal", `ctxcompact: recall store: ${this.dir} is held by another process for more than ${this.timeoutMs / 1000} s (holder: ${this.describe()}; the store's lock, taken by every runtime around each use of the file; a holder on this host that is gone, or a lock older than ${STALE_AFTER_MS / 1000} s, is taken over; else remove it when no process uses the store)`, "/path");
      }
      lockClock.sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, 20);
    }
  }

  /** Takes the lock (re-entrant: a depth count). */
  acquire() {
    if (this.depth++ > 0) return;
    try {
      this.waitFor(() => {
        try {
          mkdirSync(this.dir);
          return true;
        } catch (err) {
          if (err?.code === "EEXIST") return false;
          throw err;
        }
      });
    } catch (err) {
      this.depth = 0;
      throw err;
    }
    this.writeOwner();
  }

  release() {
    if (this.depth === 0 || --this.depth > 0) return;
    this.removeOwner();
    try { rmdirSync(this.dir); } catch { /* gone already */ }
  }

  /** Writes the owner file (best effort: a lock without one is still a lock, taken over by its age). */
  writeOwner() {
    try {
      writeFileSync(`${this.dir}/owner`, JSON.stringify({ pid: process.pid, host: hostName(), runtime: "node", at: lockClock.now() }));
    } catch { /* the directory went: nothing to record */ }
  }

  removeOwner() {
    try { unlinkSync(`${this.dir}/owner`); } catch { /* none */ }
  }

  #owner() {
    try {
      const o = JSON.parse(readFileSync(`${this.dir}/owner`, "utf8"));
      return Number.isSafeInteger(o?.pid) && o.pid > 0 ? o : null;
    } catch {
      return null;
    }
  }

  /** Whether the lock's holder is gone: an owner on this host whose pid does not run, or a lock older than STALE_AFTER_MS. */
  stale() {
    const o = this.#owner();
    if (o) {
      if (o.host === hostName() && !processRuns(o.pid)) return true;
      return lockClock.now() - Number(o.at) > STALE_AFTER_MS;
    }
    try {
      return lockClock.now() - statSync(this.dir).mtimeMs > STALE_AFTER_MS;
    } catch {
      return false;
    }
  }

  /**
   * Removes a stale lock under the breaker `<lock>.break` (so two waiters never both
   * remove one, the second a fresh lock of a third process). Whether it was removed.
   */
  breakStale() {
    if (!this.stale()) return false;
    const brk = `${this.dir}.break`;
    try {
      mkdirSync(brk);
    } catch {
      try {
        if (lockClock.now() - statSync(brk).mtimeMs > STALE_AFTER_MS) rmdirSync(brk); // left by a process that died breaking
      } catch { /* gone */ }
      return false;
    }
    try {
      if (!this.stale()) return false; // released and taken again meanwhile
      this.removeOwner();
      rmdirSync(this.dir);
      return true;
    } catch {
      return false;
    } finally {
      try { rmdirSync(brk); } catch { /* gone */ }
    }
  }

  /** The lock's holder, for an error. */
  describe() {
    const o = this.#owner();
    return o ? `pid ${o.pid} on ${o.host} (${o.runtime})` : "a process that recorded no owner (node-sqlite3-wasm's own lock)";
  }
}
