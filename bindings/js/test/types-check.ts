// Compiled by types.test.mjs with `tsc --strict --noEmit`: the hand-written index.d.ts
// must accept real usage and reject wrong usage (each @ts-expect-error must be needed).
import {
  Compactor, CompactError, ContextEngine, ErrBadBinary, ErrClosed, ErrABIMismatch,
  type CompactResult, type ErrorCode, type Message, type SummaryRequest, type Config,
  type OpenAIChatToolSchema, type ContextSearchResult, type ContextExpandResult, type ContextToolError,
  openaiSummarizer, anthropicSummarizer, type Summarize, type OpenAISummarizerOptions,
  type ResponsesItem, type GeminiContent, type AISDKMessage,
  type NativeDecision, type NativeObservation, type NativeRoute, type NativeSession, type NativeTrimResult,
} from "ctxcompact";
import { PostgresRecallStore, RecallStore, openRecallStore, parseQuery, type RecallArchive, type RecallSearch } from "ctxcompact/recall";

const config: Config = {
  compression: { threshold: 0.5, tail_mode: "lean", model_thresholds: { "claude": 0.6 }, small_context_floor: null },
  prompt_caching: { cache_ttl: "1h" },
  model: { name: "claude-sonnet-4", provider: "anthropic", context_length: 200000 },
};

const messages: Message[] = [
  { role: "system", content: "You are helpful." },
  { role: "user", content: [{ type: "text", text: "hi", cache_control: { type: "ephemeral" } }] },
  { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "ls", arguments: "{}" } }], reasoning_content: "kept" },
  { role: "tool", tool_call_id: "c1", content: "a b c" },
];

export async function main(): Promise<number> {
  const c = await Compactor.create({ config, debug: (fd, text) => void [fd, text] });
  const summarize = async (req: SummaryRequest): Promise<string> => `${req.max_tokens} ${req.messages[1].content}`;
  const res: CompactResult = await c.compact(messages, { summarize, force: true, promptTokens: 1234 });
  const first: number | null = res.report.first_changed_index;
  const role: "user" | "assistant" | "merged" | "" = res.report.summary_role;
  for (const a of res.archived) { const i: number = a.index; void [i, a.reason, a.message.role]; }
  const t = c.resolveThreshold({ model: { context_length: 128000 } });
  const n: number = t.threshold_tokens + c.countTokens(messages).total + c.prune(messages).pruned.length;
  const s: boolean = c.shouldCompress(1000, { lastCompactionTokens: 900 }).should_compress && c.validate(messages).ok;
  const ac = new AbortController();
  const timed = await c.compact(messages, {
    summarize: async (req, ctx) => { void ctx.signal.aborted; return `${req.target_tokens}`; },
    timeoutMs: 30000, signal: ac.signal,
  });
  const code0: "" | "timeout" | "error" | "empty" | "too_long" | "cancelled" = timed.report.fallback_code;
  const engine = c.engine({ summarize: () => "sync summary", timeoutMs: 5000 });
  const used = engine.updateFromResponse({ inputTokens: { total: 10 }, outputTokens: 3 });
  const src: string = used.source;
  const status = engine.getStatus();
  const breaker: number | null = engine.breakerTokens ?? status.breaker_tokens;
  const again: ContextEngine = c.engine({ state: engine.state });
  engine.updateModel("gpt-4o", 128000, { provider: "openai", apiKey: "k" });
  const compressed: CompactResult = await again.compress(messages, { currentTokens: 100, focusTopic: "tests", signal: ac.signal });
  const other: ContextEngine = await ContextEngine.create({ config, timeoutMs: 1000 });
  void [code0, src, breaker, compressed, other];
  // @ts-expect-error the fields are read from the status
  engine.lastPromptTokens = 5;
  // @ts-expect-error updateModel takes the model name and the window
  engine.updateModel({ name: "gpt-4o", context_length: 128000 });
  // @ts-expect-error signal is an AbortSignal
  await c.compact(messages, { signal: true });
  // @ts-expect-error timeoutMs is a number of milliseconds
  await c.compact(messages, { timeoutMs: "30s" });
  try {
    c.call<{ name: string }>("info").name.toUpperCase();
  } catch (err) {
    if (err instanceof CompactError) { const code: ErrorCode = err.code; const p: string = err.path; void [code, p]; }
    if (err instanceof ErrBadBinary || err instanceof ErrABIMismatch || err instanceof ErrClosed) throw err;
  }
  // @ts-expect-error unknown role
  const bad: Message = { role: "wizard", content: "x" };
  // @ts-expect-error tail_mode is "tiered" | "legacy" | "lean"
  const badCfg: Config = { compression: { tail_mode: "fat" } };
  // @ts-expect-error summarize must return a string (or a promise of one)
  await c.compact(messages, { summarize: async () => 42 });
  // @ts-expect-error the constructor is private: use Compactor.create
  new Compactor();
  // @ts-expect-error not an error code
  const code: ErrorCode = "oops";
  void [first, role, n, s, status.usage_percent, bad, badCfg, code];
  return res.messages.length;
}

// ctxcompact/recall: the store, its own entry point.
export async function store(): Promise<number> {
  const st = await RecallStore.open(null, { fts: false });
  const a: RecallArchive = { range: { id: st.nextRangeId("s"), from_index: 0, to_index: 1, summary: "S" }, rows: [] };
  const mode: "fts5" | "like" = st.searchMode;
  st.archive("s", a);
  const found: RecallSearch = st.search("s", parseQuery("src/app.py"), { limit: 5 });
  const json: string[] = st.expand("s", "r1").messages;
  const gone: number = st.deleteSession("s").messages + st.sessions().length;
  // @ts-expect-error the store is opened with RecallStore.open
  new RecallStore();
  // @ts-expect-error driver is "auto" | "node:sqlite" | "wasm"
  await RecallStore.open("x.db", { driver: "sqlite" });
  // @ts-expect-error rows carry the original JSON as text
  st.archive("s", { range: a.range, rows: [{ id: "r1.0", range_id: "r1", position: 0, role: "user", reason: "summarized", json: {}, text: "" }] });
  const engine = await ContextEngine.create({ config: { context: { engine: "lossless" } }, store: st, sessionId: "s" });
  const tools: OpenAIChatToolSchema[] = engine.getToolSchemas();
  const schema: Record<string, unknown> = engine.getToolSchemas("anthropic")[0].input_schema;
  const text: string = engine.handleToolCall("context_search", { query: "src/app.py" }) + engine.handleToolCall("context_expand", '{"id":"r1"}');
  const parsed = JSON.parse(text) as ContextSearchResult | ContextExpandResult | ContextToolError;
  const on: boolean = engine.lossless && engine.store === st && engine.sessionId === "s";
  // @ts-expect-error context.engine is "compressor" or "lossless"
  const badCtx: Config = { context: { engine: "magic" } };
  // @ts-expect-error store is a RecallStore (open it with RecallStore.open)
  await ContextEngine.create({ store: "recall.db", sessionId: "s" });
  st.close();
  void [mode, tools, schema, parsed, on, badCtx];
  return found.total + json.length + gone;
}

// The PostgreSQL store: the same methods, as promises; tool calls through handleToolCallAsync.
export async function pgStore(): Promise<number> {
  const pg = await PostgresRecallStore.open("postgres://u@db.example/recall?sslmode=require", { countLimit: null, pool: 4 });
  const a: RecallArchive = { range: { id: await pg.nextRangeId("s"), from_index: 0, to_index: 1, summary: "S" }, rows: [] };
  const done: { range: string; messages: number } = await pg.archive("s", a);
  const found: RecallSearch = await pg.search("s", "src/app.py", { limit: 5 });
  const json: string[] = (await pg.expand("s", "r1")).messages;
  const mode: "pg_trgm" = pg.searchMode;
  const path: string = pg.path;
  const any = await openRecallStore();
  const other = await openRecallStore("sqlite::memory:", { countLimit: 50 });
  const engine = await ContextEngine.create({ config: { context: { engine: "lossless" } }, store: pg, sessionId: "s" });
  const text: string = await engine.handleToolCallAsync("context_search", { query: "src/app.py" });
  // @ts-expect-error search answers with a promise
  const hits: RecallSearch = pg.search("s", "x");
  // @ts-expect-error pool is a number of connections
  await PostgresRecallStore.open("host=db", { pool: "4" });
  // @ts-expect-error the store is opened with PostgresRecallStore.open
  new PostgresRecallStore();
  await Promise.all([any.close(), other.close(), pg.close()]);
  void [done, mode, path, text, hits];
  return found.total + json.length;
}

// The ready summarizers take any client of the SDKs' shape (no SDK needed to type-check);
// the real SDK clients are checked in types-sdk-check.ts.
export function summarizers(): Summarize[] {
  const chatClient = {
    chat: { completions: { create: async (body: { model: string; messages: Array<{ role: string; content: string }> }, o?: { signal?: AbortSignal }) => ({ choices: [{ message: { content: `${body.model} ${o?.signal?.aborted}` } }] }) } },
  };
  const responsesClient = { responses: { create: async () => ({ output_text: "S" }) } };
  const anthropicClient = { messages: { create: async () => ({ content: [{ type: "text", text: "S" }] }) } };
  const options: OpenAISummarizerOptions = { model: "gpt-4.1-mini", api: "chat", maxTokens: 2000 };
  const list: Summarize[] = [
    openaiSummarizer(chatClient, { model: "gpt-4.1-mini", maxTokens: 2000 }),
    // Options typed as a whole (api either): the client must have both.
    openaiSummarizer({ ...chatClient, ...responsesClient }, options),
    openaiSummarizer(responsesClient, { model: "gpt-5", api: "responses" }),
    anthropicSummarizer(anthropicClient, { model: "claude-haiku-4-5", maxTokens: 1500 }),
  ];
  // @ts-expect-error the model is required
  openaiSummarizer(chatClient, { api: "chat" });
  // @ts-expect-error api: "responses" needs responses.create
  openaiSummarizer(chatClient, { model: "m", api: "responses" });
  // @ts-expect-error options whose api may be "responses" need a client with both
  openaiSummarizer(chatClient, options);
  // @ts-expect-error api is "chat" or "responses"
  openaiSummarizer(chatClient, { model: "m", api: "completions" });
  // @ts-expect-error an Anthropic summarizer needs messages.create
  anthropicSummarizer(chatClient, { model: "m" });
  return list;
}

// The other formats' items type-check, and results keep the item type.
export async function formats(c: Compactor): Promise<void> {
  const items: ResponsesItem[] = [
    { role: "user", content: "hi" },
    { type: "function_call", call_id: "c1", name: "read", arguments: "{}" },
    { type: "function_call_output", call_id: "c1", output: "ok" },
    { type: "reasoning", encrypted_content: "…" },
  ];
  const r = await c.compact(items, { format: "openai-responses", system: "Be brief." });
  const first: ResponsesItem | undefined = r.messages[0];
  const gemini: GeminiContent[] = [{ role: "model", parts: [{ functionCall: { name: "read", args: {} }, thoughtSignature: "s" }] }];
  c.validate(gemini, { format: "gemini" });
  const ai: AISDKMessage[] = [{ role: "assistant", content: [{ type: "tool-call", toolCallId: "t", toolName: "read", input: {} }] }];
  c.sanitize(ai, { format: "ai-sdk" });
  // @ts-expect-error not a format name
  c.validate(gemini, { format: "gemini-pro" });
  void first;
}

// Provider-native compaction: the wrappers and the engine's request cycle.
export function native(c: Compactor, engine: ContextEngine): number {
  const config: Config = {
    model: { name: "gpt-5.6", provider: "openai", context_length: 400000 },
    compression: { codex_responses_native: true, codex_responses_compact_threshold: 150000, codex_app_server_auto: "hermes", anthropic_native: "on_demand", anthropic_compact_instructions: "" },
  };
  const route: NativeRoute = { base_url: "https://api.openai.com/v1", api_mode: "codex_responses" };
  const d: NativeDecision = c.nativePolicy({ config, route, tokens: 1000, manual: false });
  const n: number = d.compact_threshold + d.local.threshold_tokens;
  const session: NativeSession = d.session;
  const off: boolean = session.disabled.includes("openai_compaction") || d.app_server?.initiator === "host";
  const seen: NativeObservation = c.nativeObserve({ config, route, session, error: { status: 400, body: { error: { param: "context_management" } } } });
  const items: ResponsesItem[] = [{ role: "user", content: "hi" }, { type: "compaction", id: "cmp_1", encrypted_content: "x" }];
  const trimmed: NativeTrimResult<ResponsesItem> = c.nativeTrim(items, { format: "responses", session, route, drop_before_newest: true });
  const p = engine.prepareRequest({ model: "gpt-5.6", input: items }, { tokens: 10 });
  const model: string = p.body.model;
  const betas: string[] = p.betas;
  const due: boolean = p.compactionBody !== null && p.compactionBody.compaction.type === "summarize" && p.trimmed.dropped.length >= 0;
  const prepared = c.nativePrepare({ model: "gpt-5.6", input: items }, { config, route });
  const preparedModel: string = prepared.body.model;
  const preparedBody: boolean = prepared.compaction_body === null && prepared.trimmed.list === "input";
  const retry: boolean = engine.observeError(400, { error: { param: "context_management" } }).retry || engine.observeError({ status: 400, error: {} }).retry;
  engine.observeResponse({ output: [] });
  engine.observeEvent({ method: "thread/compacted", params: {} }, 12);
  const restored: NativeSession | undefined = engine.state.native;
  // @ts-expect-error codex_app_server_auto is "native" | "hermes" | "off"
  const badAuto: Config = { compression: { codex_app_server_auto: "always" } };
  // @ts-expect-error anthropic_native is "off" | "threshold" | "on_demand"
  const badAnthropic: Config = { compression: { anthropic_native: true } };
  // @ts-expect-error params use wire names (drop_before_newest)
  c.nativeTrim(items, { dropBeforeNewest: true });
  // @ts-expect-error the status is a number
  engine.observeError("400", {});
  // @ts-expect-error the event is a JSON-RPC message with a method
  engine.observeEvent({ params: {} });
  void [session, off, seen, trimmed, model, betas, retry, restored, badAuto, badAnthropic, due, preparedModel, preparedBody];
  return n + trimmed.messages.length;
}
