// ctxcompact for JavaScript: the Go core compiled to WebAssembly, behind a small API.
// Loading is async; pure ops are sync; compact is async only because the summarizer
// may be. Works in Node 18+, Deno, Bun and browsers (no `node:` imports here).

import { CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed } from "./errors.js";
import { ABI_VERSION, Instance, checkModule, loadModule, prepareVocabularies, unwrap, utf8 } from "./runtime.js";
import { CountCache } from "./counts.js";
import { T, checkOptions, checkValue, describe, serialize } from "./options.js";

export { ABI_VERSION, CompactError, ErrABIMismatch, ErrBadBinary, ErrClosed };
export { anthropicSummarizer, openaiSummarizer } from "./summarizers.js";

const kInstance = Symbol.for("ctxcompact.instance");
/** Compactor's door for ContextEngine (not exported). */
const kEngine = Symbol("ctxcompact.engine");
/** ContextEngine's session loop, for the transcript test (reached through the `_session` test hook). */
const kSession = Symbol("ctxcompact.session");

/**
 * Default CompactorOptions.maxInstanceMemory: 64 MiB, as in the Python binding and the
 * Go host. An instance stays under 20 MiB on conversations of a few MB; a larger
 * call leaves its peak behind (hundreds of MB after a 50 MB compaction) unless the
 * instance is replaced.
 */
const DEFAULT_MAX_INSTANCE_MEMORY = 64 * 1024 * 1024;

/** `,"key":<json>` for a value that is not absent, else "" (JSON.stringify of a checked option). */
function field(key, value) {
  return value === undefined || value === null ? "" : `,"${key}":${JSON.stringify(value)}`;
}

/** The "system" field of a request (a format's top-level system prompt), "" when absent. */
function systemField(system) {
  return system === undefined || system === null ? "" : `,"system":${serialize(system, "/system", "invalid_messages")}`;
}

// Tickets name this process's compactions in flight (unique within the process,
// where its instances live): a random prefix and a counter.
const TICKET_PREFIX = Math.random().toString(36).slice(2, 10);
let ticketCount = 0;

function newTicket() {
  return `${TICKET_PREFIX}-${++ticketCount}`;
}

/** Default CompactOptions.timeoutMs: 2 minutes, as the CLI's. */
export const DEFAULT_TIMEOUT_MS = 120000;

/** setTimeout's largest delay; a longer timeout (or Infinity) sets no timer. */
const MAX_TIMER_MS = 2147483647;

const CONFIG = [T.object];
const CREATE_OPTIONS = { wasm: [T.any], config: CONFIG, debug: [T.function], maxInstanceMemory: [T.count], vocabularies: [T.object] };
const COMPACT_OPTIONS = {
  summarize: [T.function], force: [T.boolean], config: CONFIG, promptTokens: [T.count],
  format: [T.string], system: [T.system], focus: [T.string], timeoutMs: [T.positiveMs, "timeout"], signal: [T.signal],
  pins: [T.pins], range: [T.object],
};
const SHOULD_COMPRESS_OPTIONS = { config: CONFIG, lastCompactionTokens: [T.count] };
const HYGIENE_OPTIONS = { config: CONFIG, promptTokens: [T.count] };
const COUNT_OPTIONS = { encoding: [T.string], config: CONFIG, format: [T.string], system: [T.system] };
const PRUNE_OPTIONS = { config: CONFIG, format: [T.string], system: [T.system] };
const SANITIZE_OPTIONS = { format: [T.string] };
const VALIDATE_OPTIONS = { config: CONFIG, format: [T.string], provider: [T.string] };
// The cache and calibration ops take their parameters under their wire names.
const CACHE_APPLY_PARAMS = { system: [T.system], layout: [T.string], format: [T.string], ttl: [T.string], config: CONFIG };
const CACHE_POLICY_PARAMS = { model: [T.string], provider: [T.string], ttl: [T.string], config: CONFIG };
const CACHE_SIMULATE_PARAMS = {
  strategies: [T.strings], layout: [T.string], model: [T.string], ttl: [T.string], min_cacheable_tokens: [T.count],
  per_request: [T.boolean], timestamps: [T.array], system: [T.system], format: [T.string], config: CONFIG,
};
const CALIBRATE_PARAMS = { fixed_overhead: [T.integer], baseline: [T.object], encoding: [T.string], config: CONFIG };
const APPLY_COMPACTION_OPTIONS = { count: [T.count] };
const NATIVE_POLICY_PARAMS = { route: [T.object], session: [T.object], tokens: [T.count], manual: [T.boolean], config: CONFIG };
const NATIVE_OBSERVE_PARAMS = {
  route: [T.object], session: [T.object], response: [T.object], error: [T.object], event: [T.object],
  messages_count: [T.count], config: CONFIG,
};
const NATIVE_TRIM_PARAMS = { format: [T.string], session: [T.object], route: [T.object], drop_before_newest: [T.boolean], replace: [T.object] };
const ENGINE_OPTIONS = {
  config: CONFIG, summarize: [T.function], state: [T.object], timeoutMs: [T.positiveMs, "timeout"],
  store: [T.object], sessionId: [T.string],
};
const ENGINE_CREATE_OPTIONS = { ...CREATE_OPTIONS, ...ENGINE_OPTIONS };
const COMPRESS_OPTIONS = {
  currentTokens: [T.count], focusTopic: [T.string], force: [T.boolean], timeoutMs: [T.positiveMs, "timeout"],
  signal: [T.signal], format: [T.string], system: [T.system], memoryContext: [T.string], pins: [T.pins], range: [T.object],
};
const { force: _force, range: _range, ...PREPARE_COMPACTION_OPTIONS } = COMPRESS_OPTIONS;
const UPDATE_MODEL_OPTIONS = { provider: [T.string], baseUrl: [T.string], apiKey: [T.string], apiMode: [T.string] };
const PREPARE_OPTIONS = { tokens: [T.count], manual: [T.boolean] };

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
  /** JSON of the compactor's config as the core validated it, or undefined. */
  #configJSON;
  /** @type {Instance | null} */
  #inst;
  /** @type {Promise<Instance> | null} */
  #replacing = null;
  #closed = false;
  #maxMemory;
  /** countTokens' per-message counts. */
  #counts = new CountCache();

  /** Use Compactor.create. */
  constructor(module, instance, options, token) {
    if (token !== kInstance) throw new TypeError("ctxcompact: use `await Compactor.create(options)`");
    this.#module = module;
    this.#inst = instance;
    this.#debug = options.debug ?? undefined;
    this.#maxMemory = options.maxInstanceMemory ?? DEFAULT_MAX_INSTANCE_MEMORY;
    this.#config = options.config ?? undefined;
  }

  /**
   * Loads (compiles once per process for the packaged module), checks and
   * instantiates the module, and validates the config (a bad config fails here,
   * not at the first call).
   * @param {import("./index.d.ts").CompactorOptions} [options]
   */
  static async create(options) {
    const o = checkOptions("Compactor.create()", options, CREATE_OPTIONS);
    const module = await loadModule(o.wasm ?? undefined);
    checkModule(module);
    await prepareVocabularies(o.vocabularies ?? undefined);
    let instance;
    try {
      instance = await Instance.create(module, o.debug ?? undefined);
    } catch (err) {
      if (err instanceof ErrBadBinary || err instanceof ErrABIMismatch) throw err;
      throw new ErrBadBinary(`ctxcompact: the module failed to start: ${err.message}`, { cause: err });
    }
    const c = new Compactor(module, instance, o, kInstance);
    if (o.config !== undefined && o.config !== null) c.#configJSON = c.#mergeConfig(undefined, o.config);
    return c;
  }

  /** The compiled module (share it: `Compactor.create({ wasm: c.module })` skips compiling). */
  get module() { return this.#module; }

  /** The compactor's default config (each call's `config` is merged over it by the core's config.merge). */
  get config() { return this.#config; }

  get closed() { return this.#closed; }

  /** Releases the instance; every later call throws ErrClosed. */
  close() {
    this.#closed = true;
    this.#inst = null;
    this.#replacing = null;
    this.#counts = new CountCache(); // its counts go with the instance
  }

  /**
   * Sends a request envelope (JSON text) and returns the response envelope (JSON text)
   * unparsed: `{"result": ...}` or `{"error": {code, message, path}}`.
   * @param {string} request
   * @returns {string}
   */
  callRaw(request) {
    if (typeof request !== "string") {
      throw new CompactError("invalid_request", `ctxcompact: callRaw() takes the request envelope as JSON text, got ${describe(request)}`, "");
    }
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
      // The call is not retried: the core is deterministic, the same input would
      // trap again.
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
    if (typeof op !== "string") throw new CompactError("invalid_request", `ctxcompact: call() takes an op name, got ${describe(op)}`, "/op");
    checkValue("call()", "params", "", params, T.object);
    const body = params === undefined || params === null ? "" : serialize(params, "", "invalid_request", 0).slice(1, -1);
    return unwrap(this.callRaw(`{"op":${JSON.stringify(op)}${body ? "," + body : ""}}`));
  }

  /**
   * The core's config.merge: `over` merged over `base` per section and key (a map
   * value such as model_thresholds replaces as a whole), both validated. Returns the
   * JSON of the merged config. Errors read /config/... for `over`.
   */
  #mergeConfig(base, over) {
    const text = `{"op":"config.merge"${base === undefined ? "" : `,"base":${base}`},"config":${serialize(over, "/config", "invalid_config")}}`;
    return JSON.stringify(unwrap(this.callRaw(text)).config);
  }

  /** The JSON of the config a call runs with: the call's merged over the compactor's. */
  #callConfig(config) {
    if (config === undefined || config === null) return this.#configJSON;
    // Without a compactor config there is nothing to merge over: the op that gets
    // the call's config validates it, with the same /config/... paths.
    if (this.#configJSON === undefined) return serialize(config, "/config", "invalid_config");
    return this.#mergeConfig(this.#configJSON, config);
  }

  #configField(config) {
    const json = this.#callConfig(config);
    return json === undefined ? "" : `,"config":${json}`;
  }

  /** `{name, version, ops, error_codes, encodings}` of the loaded module. */
  info() { return this.call("info"); }

  /** Threshold, budgets and the rule that decided them, for a config (merged over the compactor's). */
  resolveThreshold(config) {
    checkValue("resolveThreshold()", "config", "config", config, T.object);
    return unwrap(this.callRaw(`{"op":"threshold.resolve"${this.#configField(config)}}`));
  }

  /** The agent trigger: prompt_tokens >= threshold_tokens (with the repeat-compaction breaker). */
  shouldCompress(promptTokens, options) {
    const o = checkOptions("shouldCompress()", options, SHOULD_COMPRESS_OPTIONS);
    checkValue("shouldCompress()", "promptTokens", "prompt_tokens", promptTokens, T.count);
    return unwrap(this.callRaw(`{"op":"should_compress"${field("prompt_tokens", promptTokens)}` +
      `${field("last_compaction_tokens", o.lastCompactionTokens)}${this.#configField(o.config)}}`));
  }

  /** The gateway safety net (85% of the window, at least 4 messages). */
  hygieneCheck(messages, options) {
    const o = checkOptions("hygieneCheck()", options, HYGIENE_OPTIONS);
    return unwrap(this.callRaw(`{"op":"hygiene.check"${field("prompt_tokens", o.promptTokens)}` +
      `${this.#configField(o.config)},"messages":${messagesJSON(messages)}}`));
  }

  /**
   * Token estimate per message and in total. Counts are kept per message object
   * (see CountCache): a conversation counted again after a message was appended
   * sends only the new message to the module.
   */
  countTokens(messages, options) {
    if (this.#closed) throw new ErrClosed(); // the cached counts too: a closed compactor answers nothing
    const o = checkOptions("countTokens()", options, COUNT_OPTIONS);
    if (o.format !== undefined || o.system !== undefined) { // another format's rule: counted whole, not cached
      return unwrap(this.callRaw(`{"op":"tokens.count"${field("encoding", o.encoding)}${field("format", o.format)}` +
        `${systemField(o.system)}${this.#configField(o.config)},"messages":${messagesJSON(messages)}}`));
    }
    if (!Array.isArray(messages)) messagesJSON(messages); // throws invalid_messages
    // The key of the counts: the encoding asked for and the call's config as sent
    // (the compactor's config never changes), which decide the counter.
    const config = o.config === undefined || o.config === null ? undefined : o.config;
    const key = `${o.encoding ?? ""}\n${config === undefined ? "" : serialize(config, "/config", "invalid_config")}`;
    return this.#counts.count(key, messages, (body) => unwrap(this.callRaw(`{"op":"tokens.count"${field("encoding", o.encoding)}` +
      `${this.#configField(config)},"messages":${body}}`)));
  }

  /** Phase 1 alone: old tool outputs become placeholders. Unchanged messages are your objects. */
  prune(messages, options) {
    const o = checkOptions("prune()", options, PRUNE_OPTIONS);
    const res = unwrap(this.callRaw(`{"op":"prune","output":"refs"${field("format", o.format)}${systemField(o.system)}` +
      `${this.#configField(o.config)},"messages":${messagesJSON(messages)}}`));
    return materialize(res, messages);
  }

  /** Tool-pair repair: orphan results removed, missing results stubbed. */
  sanitize(messages, options) {
    const o = checkOptions("sanitize()", options, SANITIZE_OPTIONS);
    const res = unwrap(this.callRaw(`{"op":"sanitize","output":"refs"${field("format", o.format)},"messages":${messagesJSON(messages)}}`));
    return materialize(res, messages);
  }

  /** Structural problems of a message list, and the rules of the provider it goes to, without changing it. */
  validate(messages, options) {
    const o = checkOptions("validate()", options, VALIDATE_OPTIONS);
    return unwrap(this.callRaw(`{"op":"validate"${field("format", o.format)}${field("provider", o.provider)}` +
      `${this.#configField(o.config)},"messages":${messagesJSON(messages)}}`));
  }

  /** Places Anthropic cache_control breakpoints (system_and_3); the input is not mutated. */
  cacheApply(messages, params) {
    return this.#withMessages("cacheApply()", "cache.apply", messages, params, CACHE_APPLY_PARAMS);
  }

  /** Whether prompt caching applies to a model/provider, with a status line. */
  cachePolicy(params) {
    return this.#withMessages("cachePolicy()", "cache.policy", undefined, params, CACHE_POLICY_PARAMS);
  }

  /** Replays a conversation request by request and prices cache strategies. */
  cacheSimulate(messages, params) {
    return this.#withMessages("cacheSimulate()", "cache.simulate", messages, params, CACHE_SIMULATE_PARAMS);
  }

  /** Calibration factor for token estimates from an API-reported prompt size. */
  calibrate(messages, promptTokens, params) {
    checkValue("calibrate()", "promptTokens", "prompt_tokens", promptTokens, T.count);
    const p = checkOptions("calibrate()", params, CALIBRATE_PARAMS, "params");
    return this.#withMessages("calibrate()", "tokens.calibrate", messages, { ...p, prompt_tokens: promptTokens }, { ...CALIBRATE_PARAMS, prompt_tokens: [T.any] });
  }

  /**
   * Provider-native compaction: what the next request should carry for the route
   * (OpenAI's context_management field, an Anthropic compaction edit and its beta,
   * the app-server decision) and why, with the next session. The model is
   * config.model.name (merged over the compactor's config).
   * @param {import("./index.d.ts").NativePolicyParams} [params]
   */
  nativePolicy(params) {
    return this.#withMessages("nativePolicy()", "native.policy", undefined, params, NATIVE_POLICY_PARAMS);
  }

  /**
   * Provider-native compaction applied to a request body (native.prepare): the
   * decision's fields set or removed, Anthropic's compaction edit merged into the
   * body's own edits, the body's input or messages trimmed, and the body of an
   * on-demand compaction due now. The result's body is a new object (copies).
   * @param {Record<string, unknown>} body
   * @param {import("./index.d.ts").NativePolicyParams} [params]
   */
  nativePrepare(body, params) {
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new CompactError("invalid_request", `ctxcompact: nativePrepare() takes the request body object, got ${describe(body)}`, "/body");
    }
    const { config, ...rest } = checkOptions("nativePrepare()", params, NATIVE_POLICY_PARAMS, "params");
    return unwrap(this.callRaw(`{"op":"native.prepare"${paramsBody(rest)}${this.#configField(config)}` +
      `,"body":${serialize(body, "/body", "invalid_request")}}`));
  }

  /**
   * Updates a native-compaction session from what the provider answered: one of
   * `response` (compaction items seen), `error` ({status, body}: a rejection of the
   * field disables it for the session) or `event` (an app-server JSON-RPC message).
   * @param {import("./index.d.ts").NativeObserveParams} [params]
   */
  nativeObserve(params) {
    return this.#withMessages("nativeObserve()", "native.observe", undefined, params, NATIVE_OBSERVE_PARAMS);
  }

  /**
   * Drops from a Responses input or Anthropic messages the compaction items of
   * another issuer than the route, and what precedes the newest compaction item.
   * Kept messages are your objects (a rewritten Anthropic message is a new one, its
   * original in rewritten[].original); dropped_messages are yours too.
   * @param {import("./index.d.ts").Item[]} messages
   * @param {import("./index.d.ts").NativeTrimParams} [params]
   */
  nativeTrim(messages, params) {
    const p = checkOptions("nativeTrim()", params, NATIVE_TRIM_PARAMS, "params");
    const res = unwrap(this.callRaw(`{"op":"native.trim"${paramsBody(p)},"messages":${messagesJSON(messages)}}`));
    return materializeTrim(res, messages, p.replace !== undefined && p.replace !== null);
  }

  #withMessages(where, op, messages, params, spec) {
    const { config, ...rest } = checkOptions(where, params, spec, "params");
    return unwrap(this.callRaw(`{"op":"${op}"${paramsBody(rest)}${this.#configField(config)}` +
      `${messages === undefined ? "" : `,"messages":${messagesJSON(messages)}`}}`));
  }

  /**
   * Compacts a conversation: prune, boundaries, summary of the middle by your
   * `summarize` (or the built-in extractive summarizer when absent), assembly.
   * A summarizer that rejects, throws, returns a non-string or does not answer
   * within `timeoutMs` yields the built-in fallback summary (report.fallback_used,
   * report.fallback_code), never a lost middle. An aborted `signal` rejects the call
   * with the signal's reason.
   * @param {import("./index.d.ts").Message[]} messages
   * @param {import("./index.d.ts").CompactOptions} [options]
   */
  async compact(messages, options) {
    if (this.#closed) throw new ErrClosed();
    const o = checkOptions("compact()", options, COMPACT_OPTIONS);
    return this.#compact(messages, o, o.config === undefined || o.config === null ? undefined : o.config);
  }

  /** compact() with checked options. `config` is the call's config, merged over the compactor's. */
  async #compact(messages, o, config) {
    if (!Array.isArray(messages)) {
      throw new CompactError("invalid_messages", `ctxcompact: messages must be an array of message objects, got ${describe(messages)}`, "/messages");
    }
    const { summarize, signal } = o;
    const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (signal?.aborted) throw abortReason(signal);
    await this.ready();
    if (signal?.aborted) throw abortReason(signal);
    const configJSON = this.#callConfig(config);
    // The same fields for begin and finish; the messages serialized and encoded once.
    // The ticket names this compaction, so that finish may leave the messages out.
    const params = `${configJSON === undefined ? "" : `,"config":${configJSON}`}${field("force", o.force)}` +
      `${field("prompt_tokens", o.promptTokens)}${field("format", o.format)}${field("focus", o.focus)}${field("pins", o.pins)}${field("range", o.range)}` +
      `${systemField(o.system)},"output":"refs"${summarize ? field("ticket", newTicket()) : ""}`;
    const encoded = utf8(messagesJSON(messages));
    const withMessages = [`${params},"messages":`, encoded, "}"];
    const begun = unwrap(this.#callParts([`{"op":"compact.begin","summarizer":"${summarize ? "host" : "builtin"}"`, ...withMessages]));
    if (begun.done) return toResult(materialize(begun, messages));

    const got = await runSummarizer(summarize, begun.summary_request, timeoutMs, signal);
    const outcome = "summary" in got ? field("summary", got.summary) : `,"error":${JSON.stringify(got)}`;
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
   * A context engine (the Hermes method set) bound to this compactor: feed it each
   * response's usage, ask shouldCompress(), call compress(). Its config is merged
   * over the compactor's; `state` restores a saved engine instead.
   * @param {import("./index.d.ts").EngineOptions} [options]
   */
  engine(options) {
    const o = checkOptions("engine()", options, ENGINE_OPTIONS);
    return new ContextEngine(this, o, kInstance);
  }

  /** For ContextEngine (kEngine is not exported): the call config and a request in pieces. */
  [kEngine]() {
    return {
      configJSON: (config) => this.#callConfig(config),
      callParts: (parts) => this.#callParts(parts),
    };
  }
}

/** `,"key":value...` of checked params under their wire names (absent ones left out), "" for none. */
function paramsBody(params) {
  const rest = { ...params };
  for (const k of Object.keys(rest)) if (rest[k] === undefined || rest[k] === null) delete rest[k];
  const body = serialize(rest, "", "invalid_request", 0).slice(1, -1);
  return body ? "," + body : "";
}

/**
 * A native.trim result with the caller's objects: the kept messages in input order
 * (after the replacement block, when `replaced`), except the rewritten ones, which
 * are new; dropped_messages and rewritten[].original are the inputs they name.
 */
function materializeTrim(res, input, replaced) {
  const gone = new Set(res.dropped.map((d) => d.index));
  const rewritten = new Set(res.rewritten.map((r) => r.index));
  let k = replaced ? 1 : 0;
  for (let i = 0; i < input.length; i++) {
    if (gone.has(i)) continue;
    if (k >= res.messages.length) break;
    if (!rewritten.has(i)) res.messages[k] = input[i];
    k++;
  }
  if (k !== res.messages.length) {
    throw new CompactError("internal", `ctxcompact: native.trim kept ${res.messages.length} messages, its dropped list accounts for ${k}`, "/messages");
  }
  res.dropped_messages = res.dropped.map((d) => input[d.index]);
  for (const r of res.rewritten) r.original = input[r.index];
  return res;
}

/** JSON of a message list, or invalid_messages at the offending value. */
function messagesJSON(messages) {
  if (!Array.isArray(messages)) {
    throw new CompactError("invalid_messages", `ctxcompact: messages must be an array of message objects, got ${describe(messages)}`, "/messages");
  }
  return serialize(messages, "/messages", "invalid_messages");
}

/**
 * The byte offsets of a JSON array's elements, [start, end) for each in turn, or
 * null when the bytes are not an array: an archive part's window is sent as the
 * elements' own bytes, as the first step sent them.
 */
function arrayElements(b) {
  const space = (c) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
  let i = 0;
  while (i < b.length && space(b[i])) i++;
  if (b[i] !== 0x5b) return null;
  const offs = [];
  let depth = 0;
  let start = -1;
  let end = -1;
  for (i++; i < b.length; i++) {
    const c = b[i];
    if (space(c)) continue;
    if (depth === 0 && (c === 0x2c || c === 0x5d)) {
      if (start >= 0) offs.push(start, end);
      start = -1;
      if (c === 0x5d) return offs;
      continue;
    }
    if (start < 0) start = i;
    if (c === 0x22) {
      for (i++; i < b.length && b[i] !== 0x22; i++) if (b[i] === 0x5c) i++;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
    end = i + 1;
  }
  return null;
}

function toResult(r) {
  const out = { messages: r.messages, report: r.report, archived: r.archived ?? [] };
  if (r.system !== undefined) out.system = r.system;
  return out;
}

function abortReason(signal) {
  if (signal.reason !== undefined) return signal.reason;
  if (typeof DOMException === "function") return new DOMException("This operation was aborted", "AbortError");
  const err = new Error("This operation was aborted");
  err.name = "AbortError";
  return err;
}

function timeoutError(message) {
  if (typeof DOMException === "function") return new DOMException(message, "TimeoutError");
  const err = new Error(message);
  err.name = "TimeoutError";
  return err;
}

/**
 * Awaits the summarizer, bounded by `timeoutMs` and the caller's `signal`, and
 * returns `{summary}` or the failure `{code, message}` (code timeout, error or
 * cancelled) that compact.finish and session.run take. Rejects with the signal's reason when the
 * caller aborts (no finish is sent then). The summarizer gets `{ signal }`, aborted
 * on timeout or when the caller aborts, to cancel its own request. No timer or
 * listener outlives the call.
 */
async function runSummarizer(summarize, request, timeoutMs, signal) {
  const ac = typeof AbortController === "function" ? new AbortController() : null;
  let timer;
  let onAbort;
  const bounds = new Promise((resolve, reject) => {
    if (timeoutMs <= MAX_TIMER_MS) {
      timer = setTimeout(() => {
        const message = `the summarizer did not answer within ${timeoutMs} ms`;
        resolve({ code: "timeout", message });
        ac?.abort(timeoutError(`ctxcompact: ${message}`));
      }, timeoutMs);
    }
    if (signal) {
      onAbort = () => {
        reject(abortReason(signal));
        ac?.abort(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
  let pending;
  try {
    pending = Promise.resolve(summarize(request, { signal: ac?.signal }));
  } catch (err) {
    pending = Promise.reject(err);
  }
  const answer = pending.then(
    (text) => (typeof text === "string"
      ? { summary: text }
      : { code: "error", message: `summarize returned ${describe(text)}, not a string` }),
    (err) => {
      if (signal?.aborted) throw abortReason(signal);
      const name = err?.name;
      return { code: name === "AbortError" ? "cancelled" : name === "TimeoutError" ? "timeout" : "error", message: errorText(err) };
    },
  );
  let got;
  try {
    got = await Promise.race([answer, bounds]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
    answer.catch(() => {}); // a summarizer settling after the timeout or the abort
    bounds.catch(() => {});
  }
  return got;
}

/** STATUS keys -> camelCase fields of ContextEngine. */
const STATUS_FIELDS = {
  name: "name", model: "model", provider: "provider", contextLength: "context_length",
  thresholdTokens: "threshold_tokens", thresholdPercent: "threshold_percent", thresholdRule: "threshold_rule",
  lastPromptTokens: "last_prompt_tokens", lastCompletionTokens: "last_completion_tokens",
  lastTotalTokens: "last_total_tokens", usagePercent: "usage_percent", compressionCount: "compression_count",
  breakerTokens: "breaker_tokens", lastCompactionFits: "last_compaction_fits",
  lastFallbackUsed: "last_fallback_used", lastFallbackCode: "last_fallback_code",
};

/**
 * The context engine (the Hermes method set): its sequences are the core's op
 * session.run (docs/SESSION.md). Each method sends an event with the engine state;
 * the core answers with an effect to perform (the summarizer, the recall store's
 * SQL) and this object sends the effect's answer back, until the sequence ends
 * with the new state (kept here as JSON text), its status and the result. The
 * rules (usage normalisation, the breaker, model switch, archiving, the tools'
 * answers, provider-native compaction) are the core's.
 */
export class ContextEngine {
  #c;
  #summarize;
  #timeoutMs;
  /** JSON text of the engine state. */
  #state;
  #status;
  /** The recall store (lossless mode) and the session id its rows go under. */
  #store;
  #sessionId;

  /** Use compactor.engine(options) or ContextEngine.create(options). */
  constructor(compactor, options, token) {
    if (token !== kInstance) throw new TypeError("ctxcompact: use `compactor.engine(options)` or `await ContextEngine.create(options)`");
    this.#c = compactor;
    this.#summarize = options.summarize ?? undefined;
    this.#timeoutMs = options.timeoutMs ?? undefined;
    this.#store = options.store ?? undefined;
    this.#sessionId = options.sessionId ?? undefined;
    if (this.#store !== undefined) checkStore(this.#store);
    if (this.#sessionId !== undefined && this.#sessionId === "") {
      throw new CompactError("invalid_request", "ctxcompact: sessionId must be a non-empty string", "/session_id");
    }
    const hasConfig = options.config !== undefined && options.config !== null;
    if (options.state !== undefined && options.state !== null) {
      if (hasConfig) {
        throw new CompactError("invalid_request", "ctxcompact: engine() takes config (a new session) or state (a saved one, which carries its config), not both", "/config");
      }
      this.#op("engine.status", `,"state":${serialize(options.state, "/state", "invalid_state")}`);
    } else {
      const config = compactor[kEngine]().configJSON(hasConfig ? options.config : undefined);
      this.#op("engine.start", config === undefined ? "" : `,"config":${config}`);
    }
    if (this.lossless) {
      if (this.#store === undefined) {
        throw new CompactError("invalid_request", 'ctxcompact: the lossless context engine (config context.engine "lossless") needs a store: `store: await RecallStore.open(path)` from ctxcompact/recall', "/store");
      }
      if (this.#sessionId === undefined) {
        throw new CompactError("invalid_request", 'ctxcompact: the lossless context engine (config context.engine "lossless") needs a sessionId, the session its archived messages go under', "/session_id");
      }
    }
  }

  /**
   * A compactor and an engine over it, in one step: the options of
   * Compactor.create (wasm, debug, maxInstanceMemory) and of compactor.engine.
   * @param {import("./index.d.ts").ContextEngineOptions} [options]
   */
  static async create(options) {
    const o = checkOptions("ContextEngine.create()", options, ENGINE_CREATE_OPTIONS);
    const { config, summarize, state, timeoutMs, store, sessionId, ...rest } = o;
    const c = await Compactor.create(rest);
    return c.engine({ config, summarize, state, timeoutMs, store, sessionId });
  }

  /** Starts (engine.start) or restores (engine.status) the state; keeps it and its status. */
  #op(op, body) {
    const res = unwrap(this.#c.callRaw(`{"op":"${op}"${body}}`));
    this.#state = JSON.stringify(res.state);
    this.#status = res.status;
  }

  /**
   * One session.run sequence, as a generator: it yields each effect the core asks
   * for and takes back `[answer, cause]` (the answer's JSON text, and the error the
   * effect failed with); it returns the sequence's result. Every step sends the
   * same event and fields (`head`, the messages' UTF-8 bytes last) with the
   * current state, which only the sequence's end replaces; the step after an
   * archive reads only its resume, so the messages are not sent again.
   *
   * An archive comes in parts (docs/SESSION.md "An archive in parts"): the effect
   * yielded holds `parts`, an iterable the store writes in one transaction, which
   * asks the core for each part after the first, sending the window of the
   * messages that part names. The answer is the last part's.
   */
  *#steps(event, head, messages) {
    let tail = messages === undefined ? ["}"] : [`,"messages":`, messages, "}"];
    let resume;
    let answer;
    let cause;
    let result;
    let elems;
    const step = () => {
      const r = unwrap(this.#c[kEngine]().callParts([`{"op":"session.run","event":${JSON.stringify(event)},"state":${this.#state}` +
        `${resume === undefined ? "" : `,"resume":${resume},"answer":${answer}`}${head}`, ...tail]));
      if (r.result !== undefined) result = r.result;
      if (!r.done && (r.effect === undefined || r.resume === undefined)) throw new ErrABIMismatch("ctxcompact: session.run neither ended nor asked for an effect");
      return r;
    };
    // The step's messages: the window [from, to) of the event's, byte for byte.
    const windowOf = (from, to) => {
      elems ??= arrayElements(messages);
      if (elems === null || to > elems.length / 2) throw new ErrABIMismatch(`ctxcompact: an archive part names messages ${from}-${to - 1}; the event has ${elems === null ? 0 : elems.length / 2}`);
      const out = [`,"messages":[`];
      for (let i = from; i < to; i++) {
        if (i > from) out.push(",");
        out.push(messages.subarray(elems[2 * i], elems[2 * i + 1]));
      }
      out.push("]}");
      return out;
    };
    for (;;) {
      const r = step();
      if (r.done && r.failed) throw effectError(r.failed, cause);
      if (r.done) {
        if (r.state === undefined || r.state === null) throw new ErrABIMismatch("ctxcompact: session.run ended with no state");
        this.#state = JSON.stringify(r.state);
        this.#status = r.status;
        return result;
      }
      resume = JSON.stringify(r.resume);
      if (r.effect.type !== "archive") {
        [answer, cause] = yield r.effect;
        continue;
      }
      let fatal;
      const parts = (function* () {
        for (let e = r.effect, k = 0; ; k++) {
          if (e.part !== k) throw (fatal = new ErrABIMismatch(`ctxcompact: session.run asked for archive part ${e.part} after part ${k - 1}`));
          const next = e.next;
          yield e.archive;
          if (next === undefined) return;
          try {
            tail = windowOf(next.from, next.to);
            answer = '{"ok":null}';
            const n = step();
            if (n.done || n.effect.type !== "archive") throw new ErrABIMismatch(`ctxcompact: session.run stopped asking for an archive's parts after part ${k}`);
            resume = JSON.stringify(n.resume);
            e = n.effect;
          } catch (err) {
            throw (fatal = err);
          }
        }
      })();
      [answer, cause] = yield { type: "archive", range_id: r.effect.range_id, parts };
      if (fatal !== undefined) throw fatal;
      tail = ["}"];
    }
  }

  /** Runs a sequence whose effects `perform` answers synchronously (the store's). */
  #runSync(event, head, messages, perform = (e) => this.#storeEffect(e, true)) {
    const steps = this.#steps(event, head, messages);
    let next = steps.next();
    while (!next.done) {
      let reply;
      try {
        const ok = perform(next.value);
        if (isThenable(ok)) {
          ok.then(undefined, () => {}); // its outcome is not awaited: the effect fails here
          throw asyncStoreError(next.value.type);
        }
        reply = [answerOk(ok), undefined];
      } catch (err) {
        reply = [answerError(err), err];
      }
      next = steps.next(reply);
    }
    return next.value;
  }

  /**
   * Runs a sequence whose effects `perform` answers asynchronously. An aborted
   * `signal` ends it with the signal's reason (nothing recorded).
   */
  async #runAsync(event, head, messages, perform, signal) {
    const ready = async () => {
      await this.#c.ready();
      if (signal?.aborted) throw abortReason(signal);
    };
    const steps = this.#steps(event, head, messages);
    await ready();
    let next = steps.next();
    while (!next.done) {
      let reply;
      try {
        reply = [answerOk(await perform(next.value)), undefined];
      } catch (err) {
        reply = [answerError(err), err];
      }
      if (signal?.aborted) {
        steps.return(undefined);
        throw abortReason(signal);
      }
      await ready();
      next = steps.next(reply);
    }
    return next.value;
  }

  /** A compress sequence's effects: the summarizer's (within timeoutMs), and the store's. */
  #compressEffect(timeoutMs, signal) {
    const summarize = this.#summarize;
    return async (effect) => {
      if (effect.type !== "summarize") return this.#storeEffect(effect);
      if (!summarize) throw new ErrABIMismatch("ctxcompact: session.run asked for a summary of a builtin compaction");
      const got = await runSummarizer(summarize, effect.request, timeoutMs, signal);
      if ("summary" in got) return got.summary;
      throw new SummaryFailure(got.code, got.message);
    };
  }

  /**
   * The recall store's effects (a lossless session's): its answer's value. sync: for
   * a synchronous method, which a store that declares itself asynchronous
   * (PostgresRecallStore) is not asked at all.
   */
  #storeEffect(effect, sync = false) {
    const store = this.#store;
    const session = this.#sessionId;
    if (store === undefined) throw new ErrABIMismatch(`ctxcompact: session.run asked a compressor engine for ${effect.type}`);
    if (sync && store.asynchronous === true) throw asyncStoreError(effect.type);
    switch (effect.type) {
      case "next_range_id":
        return store.nextRangeId(session);
      case "archive":
        return then(store.archive(session, effect.parts), () => null);
      case "search":
        return then(store.search(session, { terms: effect.terms, fts: effect.fts, like: effect.like }, { limit: effect.limit }),
          (r) => ({ hits: r.hits, total: r.total }));
      case "expand":
        return then(store.expand(session, effect.id), (r) => r.messages);
      default:
        throw new ErrABIMismatch(`ctxcompact: session.run asked for an unknown effect ${JSON.stringify(effect.type)}`);
    }
  }

  /** The compactor this engine runs on. */
  get compactor() { return this.#c; }

  /** The engine state: a JSON object to persist; `compactor.engine({ state })` restores it. */
  get state() { return JSON.parse(this.#state); }

  /** The config the engine compacts with (the state's). */
  get config() { return this.state.config; }

  /** Whether the config's context.engine is "lossless" (compactions archived to the store, the context tools). */
  get lossless() { return JSON.parse(this.#state).config?.context?.engine === "lossless"; }

  /** The recall store (or undefined) and the session id. */
  get store() { return this.#store; }
  get sessionId() { return this.#sessionId; }

  /** Records the API-reported usage of the last LLM call (OpenAI, Responses, Anthropic, AI SDK, Gemini shapes). */
  updateFromResponse(usage) {
    const body = usage === undefined ? "" : `,"usage":${serialize(usage, "/usage", "invalid_request")}`;
    return this.#runSync("usage", body).usage;
  }

  /** Whether the last reported (or the given) prompt size calls for a compaction; the breaker is the state's. */
  shouldCompress(promptTokens) {
    checkValue("shouldCompress()", "promptTokens", "prompt_tokens", promptTokens, T.count);
    return this.#runSync("should_compress", field("prompt_tokens", promptTokens)).should_compress;
  }

  /**
   * Whether to prepare the next compaction in the background now (docs/STEERING.md,
   * "Compaction that never blocks"): the last reported (or the given) prompt size
   * is at compression.prepare_ratio of the threshold but below it, and no
   * compaction is prepared, or the one prepared is old. Start prepareCompaction()
   * then, without awaiting it.
   */
  shouldPrepare(promptTokens) {
    checkValue("shouldPrepare()", "promptTokens", "prompt_tokens", promptTokens, T.count);
    return this.#runSync("should_compress", field("prompt_tokens", promptTokens)).prepare_compaction === true;
  }

  /**
   * Summarizes the messages ahead of the trigger with this engine's summarizer and
   * keeps the compaction instead of applying it: the compress() at the trigger
   * splices it into the grown conversation (the same head and summary, everything
   * after it verbatim) without calling the summarizer, when the conversation still
   * starts with these messages. The engine goes on answering while it runs.
   * Resolves to `{ prepared: { messages, head_end, tail_start } | null, reason? }`
   * (null: nothing to summarize, the summarizer failed, or a compaction was
   * recorded meanwhile).
   * @param {import("./index.d.ts").Message[]} messages
   * @param {import("./index.d.ts").PrepareCompactionOptions} [options]
   */
  async prepareCompaction(messages, options) {
    const o = checkOptions("prepareCompaction()", options, PREPARE_COMPACTION_OPTIONS);
    const encoded = utf8(messagesJSON(messages));
    const { signal } = o;
    if (signal?.aborted) throw abortReason(signal);
    const head = `${field("format", o.format)}${systemField(o.system)}${field("prompt_tokens", o.currentTokens)}` +
      `,"summarizer":"${this.#summarize ? "host" : "builtin"}"${field("focus", o.focusTopic)}${field("memory_context", o.memoryContext)}${field("pins", o.pins)},"prepare":true`;
    return this.#runAsync("compress", head, encoded, this.#compressEffect(o.timeoutMs ?? this.#timeoutMs ?? DEFAULT_TIMEOUT_MS, signal), signal);
  }

  /**
   * Compacts with the state's config, the given or last reported prompt tokens and
   * this engine's summarizer, then records the report (compression count, the
   * breaker). `focusTopic` and `memoryContext` are added to a summarizer's
   * instructions. Lossless: the originals go to the store under the range the
   * summary names before the report is recorded (a store that fails leaves the
   * engine as it was; the caller keeps its history).
   * @param {import("./index.d.ts").Message[]} messages
   * @param {import("./index.d.ts").CompressOptions} [options]
   */
  async compress(messages, options) {
    const o = checkOptions("compress()", options, COMPRESS_OPTIONS);
    const encoded = utf8(messagesJSON(messages));
    const { signal } = o;
    if (signal?.aborted) throw abortReason(signal);
    const summarize = this.#summarize;
    const timeoutMs = o.timeoutMs ?? this.#timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // Output refs: the caller's unchanged messages are put back (materialize).
    const head = `${field("format", o.format)}${systemField(o.system)}${field("force", o.force)}` +
      `${field("prompt_tokens", o.currentTokens)},"output":"refs","summarizer":"${summarize ? "host" : "builtin"}"` +
      `${field("focus", o.focusTopic)}${field("memory_context", o.memoryContext)}${field("pins", o.pins)}${field("range", o.range)}`;
    const res = await this.#runAsync("compress", head, encoded, this.#compressEffect(timeoutMs, signal), signal);
    const out = toResult(materialize(res, messages));
    // A compressor engine keeps the originals for undo() (a lossless one asks its store).
    if (out.report.compacted && this.#store === undefined) this.#originals = out.archived.map((a) => a.message);
    return out;
  }

  /**
   * Takes the last compaction back (docs/STEERING.md "See and undo"): `messages`
   * is the conversation as it is now, which must start with that compaction's
   * result; resolves to the compaction's input (the archived originals in their
   * places, the messages it returned unchanged as they are now), then what came
   * after the result, as new objects. A compressor engine uses its copy of the
   * last compress()'s originals, a lossless one its store's. Rejects
   * (invalid_state) when there is nothing to undo, the conversation changed, or
   * the restored conversation does not fit the window.
   * @param {import("./index.d.ts").Message[]} messages
   */
  async undo(messages) {
    const encoded = utf8(messagesJSON(messages));
    const originals = this.#store === undefined && this.#originals !== undefined ? `,"originals":${serialize(this.#originals, "/originals", "invalid_request")}` : "";
    const res = await this.#runAsync("undo", originals, encoded, (e) => this.#storeEffect(e));
    this.#originals = undefined;
    return res.messages;
  }

  /** The last compress()'s archived originals, for undo() (compressor engines). */
  #originals;

  /**
   * The context tools' schemas in the shape of `format` ("openai" chat, "responses",
   * "anthropic"): context_status and compact_now, after context_search and
   * context_expand in lossless mode.
   * @param {"openai" | "responses" | "anthropic"} [format]
   */
  getToolSchemas(format = "openai") {
    checkValue("getToolSchemas()", "format", "format", format, T.string);
    return this.#runSync("tools", `,"format":${JSON.stringify(format)}`).tools;
  }

  /**
   * Runs a context tool call the agent made: `args` is the call's arguments, an
   * object or its JSON text. Returns the tool result, a JSON string (errors in
   * the arguments, an unknown tool or id are `{"error": ...}` results, not
   * exceptions; a failing store throws).
   * @param {string} name
   * @param {object | string} [args]
   * @returns {string}
   */
  handleToolCall(name, args) {
    checkValue("handleToolCall()", "name", "name", name, T.string);
    const argsJSON = args === undefined || args === null ? ""
      : `,"arguments":${typeof args === "string" ? JSON.stringify(args) : serialize(args, "/arguments", "invalid_request")}`;
    return this.#runSync("tool_call", `,"name":${JSON.stringify(name)}${argsJSON}`);
  }

  /**
   * handleToolCall for any store: the same answer, as a promise, with the store's
   * methods awaited (an asynchronous store, such as PostgresRecallStore of
   * ctxcompact/recall, needs this one; a RecallStore works with both).
   * @param {string} name
   * @param {object | string} [args]
   * @returns {Promise<string>}
   */
  async handleToolCallAsync(name, args) {
    checkValue("handleToolCallAsync()", "name", "name", name, T.string);
    const argsJSON = args === undefined || args === null ? ""
      : `,"arguments":${typeof args === "string" ? JSON.stringify(args) : serialize(args, "/arguments", "invalid_request")}`;
    return this.#runAsync("tool_call", `,"name":${JSON.stringify(name)}${argsJSON}`, undefined, (e) => this.#storeEffect(e));
  }

  /**
   * Model switch (or fallback): the threshold is re-resolved for the new model and
   * window, the breaker is cleared. `apiKey` is accepted for the Hermes signature and
   * never stored.
   */
  updateModel(model, contextLength, options) {
    const o = checkOptions("updateModel()", options, UPDATE_MODEL_OPTIONS);
    checkValue("updateModel()", "model", "model", model, T.string);
    checkValue("updateModel()", "contextLength", "context_length", contextLength, T.count);
    this.#runSync("update_model", `${field("model", model)}${field("context_length", contextLength)}` +
      `${field("provider", o.provider)}${field("base_url", o.baseUrl)}${field("api_mode", o.apiMode)}`);
  }

  /**
   * Provider-native compaction for the next request (session.run's prepare, over
   * the engine's route: config.model.provider, and base_url and api_mode as
   * updateModel set them, and its native session). Returns a new body with the
   * decision applied (the OpenAI field set, or removed where it must not go;
   * Anthropic's compaction edit merged into the body's own context_management
   * edits), its `input` (Responses) or `messages` trimmed of other issuers'
   * compaction items and of what precedes the newest one (`trimmed` lists them; a
   * lossless engine archives them, `trimmed.archivedAs`), `betas` for the
   * anthropic-beta header, and `compactionBody` when an Anthropic on-demand
   * compaction is due now. Kept messages are the caller's own objects. The input
   * body is not changed; the next session is recorded in the state. `tokens`
   * defaults to the last reported prompt tokens.
   * @param {Record<string, unknown>} body
   * @param {import("./index.d.ts").PrepareRequestOptions} [options]
   */
  prepareRequest(body, options) {
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      throw new CompactError("invalid_request", `ctxcompact: prepareRequest() takes the request body object, got ${describe(body)}`, "/body");
    }
    const o = checkOptions("prepareRequest()", options, PREPARE_OPTIONS);
    const key = Array.isArray(body.input) ? "input" : Array.isArray(body.messages) ? "messages" : undefined;
    let bodyJSON;
    try {
      bodyJSON = serialize(body, "/body", "invalid_request");
    } catch (err) {
      // A value that cannot be sent inside the list is a bad message, as the core says of one.
      if (err instanceof CompactError && key !== undefined && err.path.startsWith(`/body/${key}/`)) err.code = "invalid_messages";
      throw err;
    }
    const res = this.#runSync("prepare", `${field("tokens", o.tokens)}${field("manual", o.manual)},"body":${bodyJSON}`);
    const out = res.body;
    const { archive, archived_as: archivedAs, ...rest } = res.trimmed;
    let trimmed = rest;
    if (key !== undefined) {
      const items = body[key];
      if (rest.dropped.length === 0 && rest.rewritten.length === 0) {
        out[key] = items;
      } else {
        trimmed = materializeTrim({ ...rest, messages: out[key] }, items, false);
        out[key] = trimmed.messages;
        delete trimmed.messages;
      }
    }
    trimmed.archive = archive;
    trimmed.archivedAs = archivedAs ?? null;
    const compactionBody = res.compaction_body ?? null;
    if (compactionBody !== null && key !== undefined) compactionBody[key] = out[key];
    return { body: out, betas: res.betas, decision: res.decision, trimmed, compactionBody };
  }

  /**
   * Anthropic on-demand compaction, finished: swaps the block of the compaction
   * request's `response` (an Anthropic message whose content holds the
   * `compaction` block) in for the first `count` messages (default: all of them,
   * the messages that request sent), with native.trim's `replace`, after recording
   * the block (as observeResponse). The result's messages start with the assistant
   * message holding the block; `dropped_messages` are the summarized originals,
   * which a lossless engine archives (`archivedAs`). Until a response reports
   * usage, the prompt's size is the swapped conversation's estimate.
   * @param {import("./index.d.ts").Item[]} messages
   * @param {object} response
   * @param {{count?: number}} [options]
   */
  applyCompaction(messages, response, options) {
    const o = checkOptions("applyCompaction()", options, APPLY_COMPACTION_OPTIONS);
    const encoded = utf8(messagesJSON(messages));
    const content = response !== null && typeof response === "object" ? response.content : undefined;
    if (!Array.isArray(content) || !content.some((b) => b?.type === "compaction")) {
      throw new CompactError("invalid_request", "ctxcompact: applyCompaction() takes the compaction request's response, an Anthropic message whose content holds a compaction block", "/response/content");
    }
    const head = `,"response":${serialize(response, "/response", "invalid_request")}${field("count", o.count)}`;
    const res = this.#runSync("apply_compaction", head, encoded);
    const archivedAs = res.archived_as ?? null;
    delete res.archived_as;
    materializeTrim(res, messages, true);
    res.archivedAs = archivedAs;
    return res;
  }

  /**
   * Records a provider response for native compaction (native.observe): the
   * compaction items (Responses output) or blocks (Anthropic content) it carries are
   * recorded with the route as their issuer. Usage is updateFromResponse's.
   * @param {object} response
   */
  observeResponse(response) {
    if (response === null || typeof response !== "object" || Array.isArray(response)) {
      throw new CompactError("invalid_request", `ctxcompact: observeResponse() takes the provider's response object, got ${describe(response)}`, "/response");
    }
    return this.#runSync("observe_response", `,"response":${serialize(response, "/response", "invalid_request")}`);
  }

  /**
   * Records a failed request (native.observe): a rejection of the native field
   * disables it for the session (`disabled` names the mechanism) and `retry` says to
   * send the request again, prepared anew. Takes the HTTP status and the error body
   * (an object or its text), or an SDK error (`openai` or `@anthropic-ai/sdk`:
   * its `status` and `error`).
   * @param {number | {status: number, error?: unknown}} status
   * @param {object | string} [body]
   */
  observeError(status, body) {
    if (status !== null && typeof status === "object" && typeof status.status === "number") {
      const err = status;
      status = err.status;
      body = err.error;
      // The openai SDK's error is the body's `error` member; Anthropic's the whole body.
      if (body !== null && typeof body === "object" && !Array.isArray(body) && !("error" in body)) body = { error: body };
    }
    if (!Number.isSafeInteger(status)) {
      throw new CompactError("invalid_request", `ctxcompact: observeError() takes the HTTP status (or an SDK error with a status), got ${describe(status)}`, "/error/status");
    }
    const text = body === undefined || body === null ? "null" : typeof body === "string" ? JSON.stringify(body) : serialize(body, "/error/body", "invalid_request");
    return this.#runSync("observe_error", `,"status":${status},"body":${text}`);
  }

  /**
   * Records an app-server JSON-RPC message (native.observe event): compaction
   * started or completed, the turn completed. `messagesCount` (the local transcript's
   * length) is recorded as the compaction's boundary.
   * @param {{method: string, params?: unknown}} message
   * @param {number} [messagesCount]
   */
  observeEvent(message, messagesCount) {
    if (message === null || typeof message !== "object" || Array.isArray(message)) {
      throw new CompactError("invalid_request", `ctxcompact: observeEvent() takes the JSON-RPC message object, got ${describe(message)}`, "/event");
    }
    checkValue("observeEvent()", "messagesCount", "messages_count", messagesCount, T.count);
    return this.#runSync("observe_event", `,"message":${serialize(message, "/event", "invalid_request")}${field("messages_count", messagesCount)}`);
  }

  /** /new or /reset: counters, usage, breaker and last report zeroed; the config is kept. */
  onSessionReset() {
    this.#runSync("reset", "");
  }

  /** The status of the last op (a copy). */
  getStatus() {
    return { ...this.#status };
  }

  /**
   * Test hook (kSession, undocumented): runs one event with raw session.run
   * fields (the messages, when there are some, sent last) and an effect performer,
   * through the loop the methods use: the async one for compress, the sync one
   * otherwise. Returns the sequence's raw result.
   */
  [kSession](event, fields, perform, signal) {
    const { messages, ...rest } = fields;
    let head = "";
    for (const [k, v] of Object.entries(rest)) head += `,${JSON.stringify(k)}:${JSON.stringify(v)}`;
    const encoded = messages === undefined ? undefined : utf8(JSON.stringify(messages));
    if (event === "compress") return this.#runAsync(event, head, encoded, perform, signal);
    return this.#runSync(event, head, encoded, perform);
  }
}

for (const [name, key] of Object.entries(STATUS_FIELDS)) {
  Object.defineProperty(ContextEngine.prototype, name, {
    get() { return this.getStatus()[key]; },
    enumerable: false,
    configurable: true,
  });
}

/**
 * A summarizer's failure, as session.run takes it: the fallback code (timeout,
 * cancelled, error, empty) and the message.
 */
class SummaryFailure extends Error {
  constructor(code, message) {
    super(message);
    this.name = "SummaryFailure";
    this.code = code;
  }
}

/** The answer of an effect that succeeded. */
function answerOk(value) {
  return `{"ok":${value === undefined ? "null" : JSON.stringify(value)}}`;
}

/** The answer of an effect that failed: a summarizer's code, or "store". */
function answerError(err) {
  if (err instanceof SummaryFailure) return `{"error":${JSON.stringify({ code: err.code, message: err.message })}}`;
  const message = err instanceof Error ? err.message : typeof err === "string" ? err : errorText(err);
  return `{"error":${JSON.stringify({ code: "store", message })}}`;
}

/**
 * The error of a sequence that ended because an effect failed: the effect's own
 * error (the store's), re-thrown with the core's message; one that is not an
 * Error is the cause of a CompactError.
 */
function effectError(failed, cause) {
  if (cause instanceof Error) {
    try {
      Object.defineProperty(cause, "message", { value: failed.message, writable: true, configurable: true, enumerable: false });
      return cause;
    } catch {
      // a frozen error: wrapped below
    }
  }
  return new CompactError(failed.code || "internal", failed.message, "", { cause });
}

function isThenable(v) {
  return v !== null && (typeof v === "object" || typeof v === "function") && typeof v.then === "function";
}

/** A synchronous method's store effect answered by an asynchronous store. */
function asyncStoreError(type) {
  return new CompactError("invalid_request", `ctxcompact: the store answers ${type} with a promise and this method is synchronous: ` +
    "its store must be too (RecallStore); with an asynchronous one (PostgresRecallStore) call handleToolCallAsync for tool calls, compress and undo for the rest", "/store");
}

/** f(v), after v settles when it is a promise (an async store's answer). */
function then(v, f) {
  return isThenable(v) ? v.then(f) : f(v);
}

/** A store is a RecallStore or PostgresRecallStore of ctxcompact/recall (not imported here: the main entry never loads SQLite). */
function checkStore(store) {
  for (const m of ["nextRangeId", "archive", "search", "expand"]) {
    if (typeof store[m] !== "function") {
      throw new CompactError("invalid_request", "ctxcompact: store must be a RecallStore or a PostgresRecallStore (`await RecallStore.open(path)`, `await openRecallStore(url)` from ctxcompact/recall)", "/store");
    }
  }
}

/** Test hook: the live instance's raw exports (undocumented; may change). */
export function _instanceOf(compactor) {
  return compactor[kInstance]?.();
}

/** Test hook: `engine[kSession](event, fields, perform, signal)` (undocumented; may change). */
export const _session = { kSession, SummaryFailure };
