// A minimal WASI preview1 shim: exactly what the Go wasip1 runtime of the ctxcompact
// module imports, and nothing that touches the host. No files, no env, no args, no
// network. stdout/stderr go to an optional debug hook, never to the console.
// Unknown preview1 functions get a stub returning ENOSYS.
//
// Works in Node, Deno, Bun and browsers: no `node:` imports.

const ESUCCESS = 0;
const EBADF = 8;
const EINVAL = 28;
const ENOSYS = 52;

const CLOCK_REALTIME = 0;
const CLOCK_MONOTONIC = 1;
const CLOCK_PROCESS_CPUTIME = 2;
const CLOCK_THREAD_CPUTIME = 3;

const FILETYPE_CHARACTER_DEVICE = 2;
const EVENTTYPE_CLOCK = 0;

/** Thrown by proc_exit: the guest asked to terminate; the instance is unusable after it. */
export class ProcExit extends Error {
  constructor(code) {
    super(`ctxcompact: wasm module exited with code ${code}`);
    this.name = "ProcExit";
    this.exitCode = code;
  }
}

const nowNs = typeof performance !== "undefined" && typeof performance.now === "function"
  ? () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6))
  : () => BigInt(Date.now()) * 1000000n;
const monoNs = typeof performance !== "undefined" && typeof performance.now === "function"
  ? () => BigInt(Math.round(performance.now() * 1e6))
  : () => BigInt(Date.now()) * 1000000n;

// Node's globalThis.crypto is a lazy getter that loads WebCrypto on first use: 3-11
// ms measured in a fresh Node 20 process (rnd: `globalThis.crypto` then one
// getRandomValues), paid during the module's _initialize, so by every first
// compaction. The guest asks for randomness only to seed Go's runtime (map hash
// seeds, its internal generator); the core's results never depend on it. So in Node
// (and Bun, which sets process.versions.node) the bytes come from Math.random, which
// V8 seeds per process from the OS; elsewhere (browsers, Deno), where crypto costs
// nothing to reach, from getRandomValues.
const IN_NODE = typeof globalThis.process?.versions?.node === "string";

function fillRandom(bytes) {
  const c = IN_NODE ? undefined : globalThis.crypto;
  if (c && typeof c.getRandomValues === "function") {
    // getRandomValues takes at most 65536 bytes per call.
    for (let off = 0; off < bytes.length; off += 65536) {
      c.getRandomValues(bytes.subarray(off, Math.min(off + 65536, bytes.length)));
    }
    return;
  }
  // Node, or a runtime without webcrypto: see above.
  for (let i = 0; i < bytes.length; i++) bytes[i] = (Math.random() * 256) | 0;
}

/**
 * Builds the import object for one instance. Call `bind(instance)` after
 * instantiation so the functions can reach its memory.
 * @param {WebAssembly.Module} module
 * @param {((fd: number, text: string) => void) | undefined} debug
 */
export function createWasi(module, debug) {
  /** @type {WebAssembly.Memory | null} */
  let memory = null;
  const view = () => new DataView(memory.buffer);
  const bytes = () => new Uint8Array(memory.buffer);
  const decoders = { 1: new TextDecoder(), 2: new TextDecoder() };
  let stderrTail = "";

  const impl = {
    args_sizes_get(countPtr, sizePtr) {
      const v = view();
      v.setUint32(countPtr, 0, true);
      v.setUint32(sizePtr, 0, true);
      return ESUCCESS;
    },
    args_get() { return ESUCCESS; },
    environ_sizes_get(countPtr, sizePtr) {
      const v = view();
      v.setUint32(countPtr, 0, true);
      v.setUint32(sizePtr, 0, true);
      return ESUCCESS;
    },
    environ_get() { return ESUCCESS; },
    clock_res_get(id, resPtr) {
      view().setBigUint64(resPtr, 1000n, true);
      return ESUCCESS;
    },
    clock_time_get(id, _precision, timePtr) {
      let t;
      switch (id) {
        case CLOCK_REALTIME: t = nowNs(); break;
        case CLOCK_MONOTONIC:
        case CLOCK_PROCESS_CPUTIME:
        case CLOCK_THREAD_CPUTIME: t = monoNs(); break;
        default: return EINVAL;
      }
      view().setBigUint64(timePtr, t, true);
      return ESUCCESS;
    },
    random_get(ptr, len) {
      fillRandom(new Uint8Array(memory.buffer, ptr, len));
      return ESUCCESS;
    },
    fd_write(fd, iovs, iovsLen, nwrittenPtr) {
      if (fd !== 1 && fd !== 2) return EBADF;
      const v = view();
      const mem = bytes();
      let n = 0;
      let text = "";
      for (let i = 0; i < iovsLen; i++) {
        const ptr = v.getUint32(iovs + i * 8, true);
        const len = v.getUint32(iovs + i * 8 + 4, true);
        if (debug || fd === 2) text += decoders[fd].decode(mem.subarray(ptr, ptr + len), { stream: true });
        n += len;
      }
      v.setUint32(nwrittenPtr, n, true);
      if (fd === 2) stderrTail = (stderrTail + text).slice(-4096);
      if (debug && text) {
        try { debug(fd, text); } catch { /* a debug hook must not break the module */ }
      }
      return ESUCCESS;
    },
    fd_close(fd) { return fd <= 2 ? ESUCCESS : EBADF; },
    fd_fdstat_get(fd, statPtr) {
      if (fd > 2) return EBADF;
      const v = view();
      v.setUint8(statPtr, FILETYPE_CHARACTER_DEVICE);
      v.setUint16(statPtr + 2, 0, true);
      v.setBigUint64(statPtr + 8, 0xffffffffffffffffn, true);
      v.setBigUint64(statPtr + 16, 0xffffffffffffffffn, true);
      return ESUCCESS;
    },
    fd_fdstat_set_flags(fd) { return fd <= 2 ? ESUCCESS : EBADF; },
    // No preopened directories: the first probe (fd 3) ends the enumeration.
    fd_prestat_get() { return EBADF; },
    fd_prestat_dir_name() { return EBADF; },
    sched_yield() { return ESUCCESS; },
    // The Go scheduler calls this only to sleep until a timer is due. Blocking is not
    // possible on a browser main thread, so clock subscriptions fire at once and the
    // runtime re-checks its clock; fd subscriptions report EBADF.
    poll_oneoff(inPtr, outPtr, nsubs, neventsPtr) {
      const v = view();
      for (let i = 0; i < nsubs; i++) {
        const sub = inPtr + i * 48;
        const ev = outPtr + i * 32;
        const userdata = v.getBigUint64(sub, true);
        const tag = v.getUint8(sub + 8);
        v.setBigUint64(ev, userdata, true);
        v.setUint16(ev + 8, tag === EVENTTYPE_CLOCK ? ESUCCESS : EBADF, true);
        v.setUint8(ev + 10, tag);
        v.setBigUint64(ev + 16, 0n, true);
        v.setUint16(ev + 24, 0, true);
      }
      v.setUint32(neventsPtr, nsubs, true);
      return ESUCCESS;
    },
    proc_exit(code) { throw new ProcExit(code); },
  };

  const wasi = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.module !== "wasi_snapshot_preview1" || imp.kind !== "function") continue;
    wasi[imp.name] = impl[imp.name] ?? (() => ENOSYS);
  }
  return {
    imports: { wasi_snapshot_preview1: wasi },
    /** @param {WebAssembly.Instance} instance */
    bind(instance) { memory = instance.exports.memory; },
    /** The last 4 KiB the guest wrote to stderr (a Go panic trace before a trap). */
    stderrTail() { return stderrTail; },
  };
}
