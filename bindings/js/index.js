// ctxcompact for JavaScript: the Go core compiled to WebAssembly, behind a small API.
// Loading is async; pure ops are sync; compact is async only because the summarizer
// may be. Works in Node 18+, Deno, Bun and browsers (no `node:` imports here).

import { CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed } from "./errors.js";
import { ABI_VERSION, Instance, checkModule, loadModule, unwrap, utf8 } from "./runtime.js";

export { ABI_VERSION, CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed };

const kInstance = Symbol.for("ctxcompact.instance");

/** Default CompactorOptions.maxInstanceMemory: 512 MiB, as in the Python binding. */
const DEFAULT_MAX_INSTANCE_MEMORY = 512 * 1024 * 1024;

/** Serializes a value that may be absent: `,"key":<json>` or "". */
function field(key, value) {
  return value === undefined ? "" : `,"${key}":${JSON.stringify(value)}`;
}

// Tickets name this process's compactions in flight (unique within the process,
// where its instances live): a random prefix and a counter.
const TICKET_PREFIX = Math.random().toString(36).slice(2, 10);
let ticketCount = 0;

function newTicket() {
  return `${TICKET_PREFIX}-${++ticketCount}`;
}

/** Per-section shallow merge of a call's config over the compactor's default config. */
function mergeConfig(base, over) {
  if (over === undefined || over === null) return base;
  if (base === undefined) return over;
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    out[k] = v !== null && typeof v === "object" && !Array.isArray(v) &&
      base[k] !== null && typeof base[k] === "object" && !Array.isArray(base[k])
      ? { ...base[k], ...v }
      : v;
  }
  return out;
}

/**
 * Replaces message references (integers = input indices) by the caller's own objects
 * and fills archived[].message from the input, in place.
 */
function materialize(result, input) {
  if (Array.isArray(result.messages)) {
    const msgs = result.messages;
    for (let i = 0; i < msgs.length; i++) {
      const m = msgs[i];
      if (typeof m === "number") {
        if (!(m >= 0 && m < input.length)) {
          throw new CompactError("internal", `ctxcompact: the module referenced input message ${m} of ${input.length}`, `/messages/${i}`);
        }
        msgs[i] = input[m];
      }
    }
  }
  if (Array.isArray(result.archived)) {
    for (const a of result.archived) {
      if (a.message === undefined && Number.isInteger(a.index)) a.message = input[a.index];
    }
  }
  return result;
}

function errorText(err) {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  try {
    return typeof err === "string" ? err : JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

/**
 * One loaded module and one instance. Pure ops run synchronously on the instance;
 * compactions interleave freely (begin and finish are each one sync call and the
 * state between them is an opaque string), so one instance serves any number of
 * concurrent compactions.
 */
export class Compactor {
  #module;
  #debug;
  #config;
  #configJSON;
  /** @type {Instance | null} */
  #inst;
  /** @type {Promise<Instance> | null} */
  #replacing = null;
  #closed = false;
  #maxMemory;

  /** Use Compactor.create. */
  constructor(module, instance, options, token) {
    if (token !== kInstance) throw new TypeError("ctxcompact: use `await Compactor.create(options)`");
    this.#module = module;
    this.#inst = instance;
    this.#debug = options.debug;
    this.#maxMemory = options.maxInstanceMemory ?? DEFAULT_MAX_INSTANCE_MEMORY;
    this.#config = options.config;
    this.#configJSON = options.config === undefined ? undefined : JSON.stringify(options.config);
  }

  /**
   * Loads (compiles once per process for the packaged module), checks and
   * instantiates the module.
   * @param {import("./index.d.ts").CompactorOptions} [options]
   */
  static async create(options = {}) {
    const module = await loadModule(options.wasm);
    checkModule(module);
    let instance;
    try {
      instance = await Instance.create(module, options.debug);
    } catch (err) {
      if (err instanceof ErrBadBinary || err instanceof ErrABIMismatch) throw err;
      throw new ErrBadBinary(`ctxcompact: the module failed to start: ${err.message}`, { cause: err });
    }
    return new Compactor(module, instance, options, kInstance);
  }

  /** The compiled module (share it: `Compactor.create({ wasm: c.module })` skips compiling). */
  get module() { return this.#module; }

  /** The compactor's default config (each call's `config` is merged over it per section). */
  get config() { return this.#config; }

  get closed() { return this.#closed; }

  /** Releases the instance; every later call throws ErrClosed. */
  close() {
    this.#closed = true;
    this.#inst = null;
    this.#replacing = null;
  }

  /**
   * Sends a request envelope (JSON text) and returns the response envelope (JSON text)
   * unparsed: `{"result": ...}` or `{"error": {code, message, path}}`.
   * @param {string} request
   * @returns {string}
   */
  callRaw(request) {
    return this.#invoke((inst) => inst.call(request));
  }

  /** callRaw for a request in pieces (strings and UTF-8 bytes). */
  #callParts(parts) {
    return this.#invoke((inst) => inst.callParts(parts));
  }

  #invoke(fn) {
    if (this.#closed) throw new ErrClosed();
    const inst = this.#inst;
    if (inst === null) {
      throw new CompactError("internal", "ctxcompact: the wasm instance trapped and its replacement is still starting; retry after `await compactor.ready()`");
    }
    let out;
    try {
      out = fn(inst);
    } catch (err) {
      // Anything thrown out of the guest (a trap, proc_exit, a stack overflow) leaves
      // the instance corrupt: replace it, and report the failed call as internal.
      const tail = inst.stderrTail;
      this.#replace(true);
      throw new CompactError(
        "internal",
        `ctxcompact: the wasm instance trapped (${errorText(err)}) and was replaced by a fresh one; this call failed${tail ? `; guest stderr: ${tail}` : ""}`,
        "",
        { cause: err },
      );
    }
    // Linear memory never shrinks: after a huge request, start over with a fresh
    // instance instead of keeping its peak for the life of the compactor.
    if (this.#maxMemory > 0 && inst.memoryBytes > this.#maxMemory) this.#replace(false);
    return out;
  }

  /**
   * Puts a fresh instance of the same compiled module in place. A corrupt instance
   * (trapped) is dropped at once; a healthy one (grown too big) keeps serving until
   * its replacement is up.
   */
  #replace(corrupt) {
    if (corrupt) this.#inst = null;
    try {
      this.#inst = Instance.createSync(this.#module, this.#debug);
      this.#replacing = null;
      return;
    } catch {
      // Synchronous instantiation can be refused (a browser main thread refuses
      // modules over a few MB): instantiate asynchronously.
    }
    if (this.#replacing) return;
    const p = Instance.create(this.#module, this.#debug).then(
      (inst) => {
        if (this.#replacing === p && !this.#closed) this.#inst = inst;
      },
      () => {}, // ready() starts another attempt
    ).finally(() => {
      if (this.#replacing === p) this.#replacing = null;
    });
    this.#replacing = p;
  }

  /** Test hook (undocumented): the live Instance or null. */
  [kInstance]() { return this.#inst; }

  /** Resolves when the compactor can take calls (after a trap, once its instance is replaced). */
  async ready() {
    for (let attempt = 0; this.#inst === null; attempt++) {
      if (this.#closed) throw new ErrClosed();
      if (attempt === 3) throw new CompactError("internal", "ctxcompact: could not start a fresh wasm instance after a trap");
      if (!this.#replacing) this.#replace(true);
      await this.#replacing;
    }
    if (this.#closed) throw new ErrClosed();
  }

  /**
   * Runs one op: `{"op": op, ...params}`. Returns the result object or throws CompactError.
   * @param {string} op
   * @param {object} [params]
   */
  call(op, params) {
    const body = params === undefined ? "" : JSON.stringify(params).slice(1, -1);
    return unwrap(this.callRaw(`{"op":${JSON.stringify(op)}${body ? "," + body : ""}}`));
  }

  #configField(config) {
    if (config === undefined) return this.#configJSON === undefined ? "" : `,"config":${this.#configJSON}`;
    return field("config", mergeConfig(this.#config, config));
  }

  /** `{name, version, ops, error_codes, encodings}` of the loaded module. */
  info() { return this.call("info"); }

  /** Threshold, budgets and the rule that decided them, for a config. */
  resolveThreshold(config) {
    return unwrap(this.callRaw(`{"op":"threshold.resolve"${this.#configField(config)}}`));
  }

  /** The agent trigger: prompt_tokens >= threshold_tokens (with the repeat-compaction breaker). */
  shouldCompress(promptTokens, options = {}) {
    return unwrap(this.callRaw(`{"op":"should_compress","prompt_tokens":${JSON.stringify(promptTokens)}` +
      `${field("last_compaction_tokens", options.lastCompactionTokens)}${this.#configField(options.config)}}`));
  }

  /** The gateway safety net (85% of the window, at least 4 messages). */
  hygieneCheck(messages, options = {}) {
    return unwrap(this.callRaw(`{"op":"hygiene.check"${field("prompt_tokens", options.promptTokens)}` +
      `${this.#configField(options.config)},"messages":${JSON.stringify(messages)}}`));
  }

  /** Token estimate per message and in total. */
  countTokens(messages, options = {}) {
    return unwrap(this.callRaw(`{"op":"tokens.count"${field("encoding", options.encoding)}` +
      `${this.#configField(options.config)},"messages":${JSON.stringify(messages)}}`));
  }

  /** Phase 1 alone: old tool outputs become placeholders. Unchanged messages are your objects. */
  prune(messages, options = {}) {
    const res = unwrap(this.callRaw(`{"op":"prune","output":"refs"${this.#configField(options.config)},"messages":${JSON.stringify(messages)}}`));
    return materialize(res, messages);
  }

  /** Tool-pair repair: orphan results removed, missing results stubbed. */
  sanitize(messages) {
    const res = unwrap(this.callRaw(`{"op":"sanitize","output":"refs","messages":${JSON.stringify(messages)}}`));
    return materialize(res, messages);
  }

  /** Structural problems of a message list, without changing it. */
  validate(messages) {
    return unwrap(this.callRaw(`{"op":"validate","messages":${JSON.stringify(messages)}}`));
  }

  /** Places Anthropic cache_control breakpoints (system_and_3); the input is not mutated. */
  cacheApply(messages, params = {}) {
    return this.#withMessages("cache.apply", messages, params);
  }

  /** Whether prompt caching applies to a model/provider, with a status line. */
  cachePolicy(params = {}) {
    return this.#withMessages("cache.policy", undefined, params);
  }

  /** Replays a conversation request by request and prices cache strategies. */
  cacheSimulate(messages, params = {}) {
    return this.#withMessages("cache.simulate", messages, params);
  }

  /** Calibration factor for token estimates from an API-reported prompt size. */
  calibrate(messages, promptTokens, params = {}) {
    return this.#withMessages("tokens.calibrate", messages, { ...params, prompt_tokens: promptTokens });
  }

  #withMessages(op, messages, params) {
    const { config, ...rest } = params;
    const body = JSON.stringify(rest).slice(1, -1);
    return unwrap(this.callRaw(`{"op":"${op}"${body ? "," + body : ""}${this.#configField(config)}` +
      `${messages === undefined ? "" : `,"messages":${JSON.stringify(messages)}`}}`));
  }

  /**
   * Compacts a conversation: prune, boundaries, summary of the middle by your
   * `summarize` (or the built-in extractive summarizer when absent), assembly.
   * A summarizer that rejects or throws yields the built-in fallback summary
   * (report.fallback_used), never a lost middle.
   * @param {import("./index.d.ts").Message[]} messages
   * @param {import("./index.d.ts").CompactOptions} [options]
   */
  async compact(messages, options = {}) {
    if (this.#closed) throw new ErrClosed();
    if (!Array.isArray(messages)) {
      throw new CompactError("invalid_messages", "ctxcompact: messages must be an array", "/messages");
    }
    const { summarize } = options;
    if (summarize !== undefined && typeof summarize !== "function") {
      throw new TypeError("ctxcompact: options.summarize must be a function");
    }
    await this.ready();
    // The same fields for begin and finish; the messages serialized and encoded once.
    // The ticket names this compaction, so that finish may leave the messages out.
    const params = `${this.#configField(options.config)}${field("force", options.force)}` +
      `${field("prompt_tokens", options.promptTokens)}${field("format", options.format)}${field("system", options.system)}` +
      `,"output":"refs"${summarize ? field("ticket", newTicket()) : ""}`;
    const encoded = utf8(JSON.stringify(messages));
    const withMessages = [`${params},"messages":`, encoded, "}"];
    const begun = unwrap(this.#callParts([`{"op":"compact.begin","summarizer":"${summarize ? "host" : "builtin"}"`, ...withMessages]));
    if (begun.done) return toResult(materialize(begun, messages));

    let outcome;
    try {
      const text = await summarize(begun.summary_request);
      outcome = typeof text === "string"
        ? field("summary", text)
        : field("error", `summarize returned ${text === null ? "null" : typeof text}, not a string`);
    } catch (err) {
      outcome = field("error", errorText(err));
    }
    await this.ready();
    // The instance that began it keeps the compaction: finish without the messages.
    // Another one (the first was replaced after a trap, or the entry was evicted)
    // answers invalid_state at /messages, and the whole finish goes.
    const head = `{"op":"compact.finish","state":${JSON.stringify(begun.state)}${outcome}`;
    let finished;
    try {
      finished = unwrap(this.#callParts([head, `${params}}`]));
    } catch (err) {
      if (!(err instanceof CompactError && err.code === "invalid_state" && err.path === "/messages")) throw err;
      finished = unwrap(this.#callParts([head, ...withMessages]));
    }
    return toResult(materialize(finished, messages));
  }

  /**
   * A Hermes-style context engine bound to this compactor: feed it each response's
   * usage, ask shouldCompress(), call compress().
   * @param {import("./index.d.ts").EngineOptions} [options]
   */
  engine(options = {}) {
    return new ContextEngine(this, options);
  }
}

function toResult(r) {
  const out = { messages: r.messages, report: r.report, archived: r.archived ?? [] };
  if (r.system !== undefined) out.system = r.system;
  return out;
}

/**
 * The method set of a Hermes-style context engine over a Compactor. It keeps the
 * last API-reported prompt tokens and the breaker state between calls.
 */
export class ContextEngine {
  #c;
  #config;
  #summarize;
  lastPromptTokens = 0;
  lastCompletionTokens = 0;
  compressionCount = 0;
  /** tokens_after of the last compaction when it did not fit (the repeat-compaction breaker). */
  lastCompactionTokens = undefined;

  constructor(compactor, options = {}) {
    this.#c = compactor;
    this.#config = mergeConfig(compactor.config, options.config);
    this.#summarize = options.summarize;
  }

  get config() { return this.#config; }

  /** Records an OpenAI (`prompt_tokens`) or Anthropic (`input_tokens` + cache reads/writes) usage object. */
  updateFromResponse(usage) {
    if (!usage) return;
    if (typeof usage.prompt_tokens === "number") {
      this.lastPromptTokens = usage.prompt_tokens;
    } else if (typeof usage.input_tokens === "number") {
      this.lastPromptTokens = usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
    }
    const out = usage.completion_tokens ?? usage.output_tokens;
    if (typeof out === "number") this.lastCompletionTokens = out;
  }

  /** Whether the last (or the given) prompt size calls for a compaction. */
  shouldCompress(promptTokens = this.lastPromptTokens) {
    return this.#c.shouldCompress(promptTokens, {
      config: this.#config,
      lastCompactionTokens: this.lastCompactionTokens,
    }).should_compress;
  }

  /** Compacts with this engine's config, prompt tokens and summarizer. */
  async compress(messages, options = {}) {
    const res = await this.#c.compact(messages, {
      summarize: this.#summarize,
      promptTokens: this.lastPromptTokens || undefined,
      ...options,
      config: mergeConfig(this.#config, options.config),
    });
    if (res.report.compacted) {
      this.compressionCount++;
      // The breaker only matters when the result still does not fit.
      this.lastCompactionTokens = res.report.fits ? undefined : res.report.tokens_after;
      this.lastPromptTokens = res.report.tokens_after;
    }
    return res;
  }

  /** Switches model (name, provider, context_length); thresholds are re-resolved. */
  updateModel(model) {
    this.#config = mergeConfig(this.#config, { model });
  }

  /** Forgets usage and the breaker; keeps the config. */
  onSessionReset() {
    this.lastPromptTokens = 0;
    this.lastCompletionTokens = 0;
    this.compressionCount = 0;
    this.lastCompactionTokens = undefined;
  }

  /** `{last_prompt_tokens, threshold_tokens, context_length, usage_percent, compression_count}`. */
  getStatus() {
    const t = this.#c.resolveThreshold(this.#config);
    return {
      last_prompt_tokens: this.lastPromptTokens,
      threshold_tokens: t.threshold_tokens,
      context_length: t.context_length,
      usage_percent: t.context_length ? Math.round((this.lastPromptTokens / t.context_length) * 1000) / 10 : 0,
      compression_count: this.compressionCount,
    };
  }
}

/** Test hook: the live instance's raw exports (undocumented; may change). */
export function _instanceOf(compactor) {
  return compactor[kInstance]?.();
}
