// Types of the ctxcompact JS binding, written by hand. Wire objects (config, results,
// reports) keep the JSON wire names (snake_case); only function and option names are
// camelCase. See docs/OPS.md for the contract of every op.

import type { PostgresRecallStore, RecallStore } from "./recall.js";

// ---------------------------------------------------------------------------
// Messages (OpenAI chat format; unknown fields are preserved byte for byte)

export type Role = "system" | "developer" | "user" | "assistant" | "tool";

export interface TextPart {
  type: "text";
  text: string;
  /** Anthropic prompt-cache breakpoint, as placed by cache.apply. */
  cache_control?: CacheControl;
  [extra: string]: unknown;
}

export interface ImagePart {
  type: "image_url";
  image_url: { url: string; detail?: "auto" | "low" | "high" };
  cache_control?: CacheControl;
  [extra: string]: unknown;
}

/** Any other content part (input_audio, file, provider-specific parts). */
export interface OtherPart {
  type: string;
  [extra: string]: unknown;
}

export type ContentPart = TextPart | ImagePart | OtherPart;

export interface CacheControl {
  type: "ephemeral";
  ttl?: "5m" | "1h";
}

export interface ToolCall {
  id: string;
  type: "function";
  function: {
    name: string;
    /** The arguments as a JSON string, as the model produced them. */
    arguments: string;
  };
  [extra: string]: unknown;
}

export interface SystemMessage {
  role: "system" | "developer";
  content: string | ContentPart[];
  name?: string;
  [extra: string]: unknown;
}

export interface UserMessage {
  role: "user";
  content: string | ContentPart[];
  name?: string;
  [extra: string]: unknown;
}

export interface AssistantMessage {
  role: "assistant";
  content: string | ContentPart[] | null;
  /** Several calls in one message are parallel calls; with their results they form one tool group. */
  tool_calls?: ToolCall[];
  name?: string;
  [extra: string]: unknown;
}

export interface ToolMessage {
  role: "tool";
  tool_call_id: string;
  content: string | ContentPart[];
  [extra: string]: unknown;
}

export type Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

// --- OpenAI Responses input items (format "responses", alias "openai-responses") ---

export interface ResponsesMessageItem {
  type?: "message";
  role: "user" | "assistant" | "system" | "developer";
  content: string | Array<{ type: "input_text" | "output_text" | "input_image" | "input_file" | "refusal" | (string & {}); [extra: string]: unknown }>;
  phase?: string;
  [extra: string]: unknown;
}

export interface ResponsesFunctionCall {
  type: "function_call";
  call_id: string;
  name: string;
  /** The arguments as a JSON string. */
  arguments: string;
  id?: string;
  status?: string;
  [extra: string]: unknown;
}

export interface ResponsesFunctionCallOutput {
  type: "function_call_output";
  call_id: string;
  output: string | Array<{ type: string; [extra: string]: unknown }>;
  [extra: string]: unknown;
}

/** Any other item (custom_tool_call, computer_call, reasoning, compaction, web_search_call, …): kept byte for byte. */
export interface ResponsesOtherItem {
  type: string;
  [extra: string]: unknown;
}

export type ResponsesItem = ResponsesMessageItem | ResponsesFunctionCall | ResponsesFunctionCallOutput | ResponsesOtherItem;

// --- Vercel AI SDK ModelMessage (format "ai-sdk") ---

export type AISDKPart =
  | { type: "text"; text: string; providerOptions?: Record<string, unknown>; [extra: string]: unknown }
  | { type: "tool-call"; toolCallId: string; toolName: string; input: unknown; [extra: string]: unknown }
  | {
      type: "tool-result";
      toolCallId: string;
      toolName: string;
      output: { type: "text" | "json" | "error-text" | "error-json" | "content" | "execution-denied"; value?: unknown; [extra: string]: unknown };
      [extra: string]: unknown;
    }
  | { type: "image" | "file" | "reasoning" | "tool-approval-request" | "tool-approval-response" | "custom" | (string & {}); [extra: string]: unknown };

export interface AISDKMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | AISDKPart[];
  /** Cache breakpoints go in providerOptions.anthropic.cacheControl. */
  providerOptions?: Record<string, unknown>;
  [extra: string]: unknown;
}

// --- Gemini contents (format "gemini") ---

export interface GeminiPart {
  text?: string;
  thought?: boolean;
  /** Stays on the part it came on. */
  thoughtSignature?: string;
  inlineData?: { mimeType: string; data: string };
  fileData?: { mimeType?: string; fileUri: string };
  functionCall?: { id?: string; name: string; args?: Record<string, unknown> };
  functionResponse?: { id?: string; name: string; response: Record<string, unknown> };
  [extra: string]: unknown;
}

export interface GeminiContent {
  role: "user" | "model";
  parts: GeminiPart[];
  [extra: string]: unknown;
}

/** Gemini's systemInstruction (pass it as `system` with format "gemini"). */
export interface GeminiSystemInstruction {
  role?: string;
  parts: GeminiPart[];
}

/** An item of a conversation in any format: unchanged items come back as your objects. */
export type Item = Message | ResponsesItem | AISDKMessage | GeminiContent;

// ---------------------------------------------------------------------------
// Configuration (snake_case wire keys; every key optional; unknown keys are invalid_config)

export interface CompressionConfig {
  /** Compaction on or off (default true). */
  enabled?: boolean;
  /** Fraction of the context window that triggers compaction, in (0, 1] (default 0.50). */
  threshold?: number;
  /** Model-name substring -> fraction; the longest matching key wins (default {}). */
  model_thresholds?: Record<string, number>;
  /** Legacy tail budget = threshold_tokens * target_ratio, in (0, 1] (default 0.20). */
  target_ratio?: number;
  /** "tiered" (target_ratio, shrunk below a 200K window, and the facts index), "legacy" (Hermes Agent's: target_ratio and protect_last_n as set, no index) or "lean" (2.5% of the window, 10K..25K tokens, and the index) (default "tiered"). */
  tail_mode?: "tiered" | "legacy" | "lean";
  /** Only prune tool outputs, with no summary, when that leaves the conversation no larger than a summarizing compaction would (default false). */
  prune_first?: boolean;
  /** Head messages kept verbatim: system + first exchange (default 3). */
  protect_first_n?: number;
  /** Minimum tail messages when the token budget protects fewer (default 20). */
  protect_last_n?: number;
  /** Real user messages guaranteed in the tail (default 1). */
  min_tail_user_messages?: number;
  /** Raise provider openai-codex / gpt-5.5 to 0.85 (default true). */
  codex_gpt55_autoraise?: boolean;
  /** Raise-only floor for windows below small_context_limit; 0 or null disables (default 0.75). */
  small_context_floor?: number | null;
  /** Windows below this many tokens get the small-context floor (default 512000). */
  small_context_limit?: number;
  /** Gateway safety net fraction (default 0.85). */
  hygiene_threshold?: number;
  /** The summarizer model's window in tokens; 0 = the main model's (default 0). */
  summary_context_length?: number;
  /** Standing guidance added to every summary request, at most 8,000 bytes (default none; docs/STEERING.md). */
  instructions?: string;
  /** Share of the threshold at which a context engine's shouldPrepare() says to prepare the next compaction in the background (default 0.85; docs/STEERING.md). */
  prepare_ratio?: number;
  /** Opt in to OpenAI server-side compaction (gpt-5.6 family on api.openai.com or the ChatGPT Codex backend) (default false). */
  codex_responses_native?: boolean;
  /** Its compact_threshold, clamped to threshold_tokens − 8192 (default 200000). */
  codex_responses_compact_threshold?: number;
  /** Who starts app-server compaction: the app server ("native"), this threshold ("hermes"), or nobody ("off") (default "native"). */
  codex_app_server_auto?: "native" | "hermes" | "off";
  /** Show the one-time notice when the Codex gpt-5.5 autoraise applies (default true). */
  codex_gpt55_autoraise_notice?: boolean;
  /** Anthropic server-side compaction: "off", "threshold" (the compact_20260112 edit) or "on_demand" (default "off"). */
  anthropic_native?: "off" | "threshold" | "on_demand";
  /** Instructions for Anthropic's summarizer; "" = the server's default (default ""). */
  anthropic_compact_instructions?: string;
}

export interface PromptCachingConfig {
  /** Cache TTL of the breakpoints: "5m" or "1h" (default "5m"). */
  cache_ttl?: "5m" | "1h";
}

export interface ModelConfig {
  /** Model name, matched against model_thresholds keys (default ""). */
  name?: string;
  /** Provider id, e.g. "anthropic", "openrouter", "openai-codex" (default ""). */
  provider?: string;
  /** Context window in tokens (default 200000). */
  context_length?: number;
}

export interface TokensConfig {
  /** Token counter: "rough" (chars/4) or an encoding listed by info().encodings (default "rough"). */
  encoding?: string;
  /** Scale factor for estimates, in (0, 10] (default 1). */
  calibration?: number;
}

export interface Config {
  /** When and how much to compact. */
  compression?: CompressionConfig;
  /** Prompt-cache breakpoints. */
  prompt_caching?: PromptCachingConfig;
  /** The main model and its window. */
  model?: ModelConfig;
  /** Token counting. */
  tokens?: TokensConfig;
  /** The context engine a ContextEngine runs. */
  context?: ContextConfig;
}

export interface ContextConfig {
  /**
   * "compressor" (default): compaction only. "lossless": every compaction's originals
   * are archived to the engine's recall store under its session id, the summary names
   * the range (r<k>), and the agent gets the context_search / context_expand tools.
   */
  engine?: "compressor" | "lossless";
  /** Input messages one part of a lossless archive spans, 1 to 1,000,000 (default 8,192; docs/SESSION.md "An archive in parts"). */
  archive_part?: number;
}

// ---------------------------------------------------------------------------
// Errors

/** Stable error codes of the core (the contract; message text is not). */
export type ErrorCode =
  | "invalid_json"
  | "invalid_request"
  | "unknown_op"
  | "invalid_messages"
  | "invalid_config"
  | "invalid_state"
  | "input_too_large"
  | "internal";

/** An error envelope from the core; "internal" also reports a trapped (and replaced) instance. */
export declare class CompactError extends Error {
  constructor(code: ErrorCode, message: string, path?: string, options?: { cause?: unknown });
  readonly name: "CompactError";
  /** Stable machine-readable code. */
  code: ErrorCode;
  /** JSON pointer (RFC 6901) into the request; "" for the whole request. */
  path: string;
}

/** The module is not a ctxcompact module (does not compile, wrong exports or imports, fails to start). */
export declare class ErrBadBinary extends Error {
  readonly name: "ErrBadBinary";
}

/** The module's ctxc_abi_version differs from ABI_VERSION. */
export declare class ErrABIMismatch extends Error {
  readonly name: "ErrABIMismatch";
}

/** The compactor was closed. */
export declare class ErrClosed extends Error {
  readonly name: "ErrClosed";
}

/** The boundary version this binding speaks. */
export declare const ABI_VERSION: 1;

// ---------------------------------------------------------------------------
// Results of the ops

export interface InfoResult {
  name: "ctxcompact";
  version: string;
  ops: string[];
  error_codes: ErrorCode[];
  encodings: string[];
}

export type ThresholdRule = "threshold" | "model_thresholds" | "small_context_floor" | "codex_gpt55_autoraise";

export interface ThresholdResult {
  context_length: number;
  fraction: number;
  /** What decided the fraction. */
  rule: ThresholdRule;
  /** The model_thresholds key that matched, if any. */
  override_key: string | null;
  floor_applied: boolean;
  /** The Codex gpt-5.5 autoraise lifted the fraction (show a one-time notice). */
  autoraised: boolean;
  threshold_tokens: number;
  tail_token_budget: number;
  /** What decided tail_token_budget; "small_window": below a 200K window with target_ratio and protect_last_n unset, the tail scales with the window. */
  tail_rule: "target_ratio" | "lean" | "small_window" | "window_cap";
  max_summary_tokens: number;
  hygiene_tokens: number;
}

export type TriggerReason = "at_or_above_threshold" | "below_threshold" | "disabled" | "breaker_open" | "too_few_messages" | "requested";

export interface ShouldCompressResult {
  should_compress: boolean;
  prompt_tokens: number;
  threshold_tokens: number;
  reason: TriggerReason;
}

export interface HygieneResult {
  should_compact: boolean;
  tokens: number;
  /** API-reported prompt tokens, or the estimate when none were given. */
  source: "reported" | "estimate";
  threshold_tokens: number;
  /** Number of messages checked. */
  messages: number;
  reason: TriggerReason;
  [extra: string]: unknown;
}

export interface TokenCountResult {
  encoding: string;
  /** The calibration factor applied: config.tokens.calibration, else the model family's prior (docs/TOKENS.md), else 1. */
  calibration: number;
  /** Where the factor came from: "config", "prior:<family>" (e.g. "prior:claude") or "none". */
  calibration_source: string;
  total: number;
  per_message: number[];
}

/** Something of the summarized turns a summary must not lose. */
export interface Anchor {
  kind: "file" | "request" | "error";
  value: string;
}

export type ArchiveReason = "summarized" | "pruned" | "merged" | "orphan_removed" | "system_note" | "repaired";

/** An input message that is not returned unchanged, with its original object. */
export interface ArchivedEntry {
  /** Index in the input array. */
  index: number;
  reason: ArchiveReason;
  /** The caller's original message object (the same object, not a copy). */
  message: Message;
}

export interface PruneResult<M extends Item = Message> {
  /** The pruned list; unchanged messages are the caller's own objects. */
  messages: M[];
  /** Input indices of pruned tool outputs. */
  pruned: number[];
  archived: ArchivedEntry[];
  tokens_before: number;
  tokens_after: number;
}

export interface SanitizeResult<M extends Item = Message> {
  messages: M[];
  /** Input indices of orphan tool results removed. */
  removed: number[];
  /** tool_call ids that got a stub result. */
  stubbed: string[];
  /** Input indices of Anthropic messages whose tool_result blocks were fixed. */
  repaired: number[];
  archived: ArchivedEntry[];
}

export interface ValidationProblem {
  code: string;
  path: string;
  message: string;
}

export interface ValidateResult {
  ok: boolean;
  problems: ValidationProblem[];
}

/** A message format: OpenAI chat, Anthropic Messages, OpenAI Responses items, Vercel AI SDK messages or Gemini contents (with aliases). */
export type Format =
  | "openai" | "openai-chat"
  | "anthropic" | "anthropic-messages"
  | "responses" | "openai-responses"
  | "ai-sdk"
  | "gemini";

/** What the summarizer is asked: send `messages` to an LLM with `max_tokens`, return its text. */
export interface SummaryRequest {
  messages: [{ role: "system"; content: string }, { role: "user"; content: string }];
  target_tokens: number;
  max_tokens: number;
  /** True when a previous summary is being updated rather than written anew. */
  iterative: boolean;
  /** Input index range [from, to) being summarized. */
  middle: { from: number; to: number };
}

/** Why the built-in summary replaced the host's ("" when it did not). */
export type FallbackCode = "" | "timeout" | "error" | "empty" | "too_long" | "cancelled";

export interface CompactReport {
  compacted: boolean;
  /** compacted, pruned_only, below_threshold, disabled or nothing_to_compact. */
  reason: "compacted" | "pruned_only" | "below_threshold" | "disabled" | "nothing_to_compact" | (string & {});
  tokens_before: number;
  tokens_after: number;
  threshold_tokens: number;
  /** false when head + summary + tail still exceed the threshold (pass tokens_after as lastCompactionTokens). */
  fits: boolean;
  messages_before: number;
  messages_after: number;
  head_end: number;
  tail_start: number;
  /** Input indices of pruned tool outputs. */
  pruned: number[];
  /** Input index range [from, to) replaced by the summary. */
  summarized: { from: number; to: number } | null;
  /** "" when nothing was summarized. */
  summary_role: "user" | "assistant" | "merged" | "";
  /** Output index of the tail message the summary was merged into, if merged. */
  summary_merged_into: number | null;
  summary_tokens: number;
  /** How many summary requests the summary took when its turns did not fit the summarizer's window in one (a context engine's compress, docs/STEERING.md); absent: one. */
  summary_chunks?: number;
  /** The summary was prepared ahead of the trigger and spliced into the grown conversation (prepareCompaction(), docs/STEERING.md). */
  prepared?: boolean;
  /** Input indexes of the messages kept verbatim for a pin (absent: none pinned). */
  pinned?: number[];
  /** "" when nothing was summarized. */
  summarizer: "host" | "builtin" | "";
  fallback_used: boolean;
  /** Why the built-in summary was used ("" when it was not). */
  fallback_reason: string;
  /** The fallback's code: "" (none), "timeout", "error", "empty", "too_long" or "cancelled". */
  fallback_code: FallbackCode;
  iterative: boolean;
  active_request_in_summary: boolean;
  /** The host's summary was longer than its max_tokens and was cut at a section boundary. */
  summary_truncated: boolean;
  /** Anchors of the summarized turns the host's summary left out, appended to it in one section (empty for the built-in summary). */
  anchors_added: Anchor[];
  /** First output index that differs from the input (where the prompt cache breaks); null when nothing changed. */
  first_changed_index: number | null;
  /** The compaction note was appended to the system prompt (its original is archived, reason "system_note"; in the Anthropic layout it is the returned `system`). */
  system_note_added: boolean;
  orphans_removed: number[];
  stubs_added: string[];
  /** Input indices of Anthropic messages whose tool_result blocks were fixed (reason "repaired"). */
  repaired: number[];
  /** The factor the token counts were scaled by: config.tokens.calibration, else the model family's prior, else 1. */
  calibration: number;
  /** Where it came from: "config", "prior:<family>" or "none". */
  calibration_source: string;
}

export interface CompactResult<M extends Item = Message> {
  /** The compacted list; unchanged messages are the caller's own objects. */
  messages: M[];
  report: CompactReport;
  /** Every input message not returned unchanged, with its input index. */
  archived: ArchivedEntry[];
  /** Anthropic layout: the top-level system prompt to send with `messages` (with the compaction note when one was added). */
  system?: string | ContentPart[] | GeminiSystemInstruction;
}

export interface CacheApplyResult<M extends Item = Message> {
  /** The messages with breakpoints (new objects; the input is not mutated). */
  messages: M[];
  /** The Anthropic top-level system value, when one was given. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
  /** Indices of the messages that carry a marker. */
  marked: number[];
  system_marked: boolean;
  /** Markers placed (at most 4). */
  markers: number;
  ttl: "5m" | "1h";
}

export interface CachePolicyResult {
  enabled: boolean;
  ttl: "5m" | "1h";
  /** "anthropic" (native API) or "openai" (OpenRouter envelope); "" when disabled. */
  layout: "anthropic" | "openai" | "";
  reason: string;
  /** e.g. "Prompt caching: ENABLED (Claude via OpenRouter, 5m TTL)". */
  status: string;
}

export interface CacheStrategyResult {
  cost: number;
  savings: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  uncached_tokens: number;
  hits: number;
  misses: number;
  requests?: Array<{ message: number; prompt_tokens: number; cache_read_tokens: number; cache_write_tokens: number; uncached_tokens: number; cost: number; breakpoints: number; status: string }>;
}

export interface CacheSimulateResult {
  /** Strategy name -> cost of replaying the conversation with it. */
  strategies: Record<string, CacheStrategyResult>;
  requests: number;
  total_input_tokens: number;
  layout: string;
  ttl: string;
  min_cacheable_tokens: number;
  lookback_blocks: number;
  timed: boolean;
  [extra: string]: unknown;
}

export interface CalibrateResult {
  encoding: string;
  /** "ratio" (one observation) or "delta" (against a baseline). */
  method: "ratio" | "delta";
  /** Multiply estimates by this (config.tokens.calibration). */
  factor: number;
  /** Uncalibrated estimate of the messages. */
  estimate: number;
  /** Estimate of the messages after the baseline (delta method). */
  estimate_delta: number;
  prompt_tokens: number;
  fixed_overhead: number;
}

// --- Provider-native compaction (native.policy, native.observe, native.trim) ---

/** Where a request goes (every key optional). The route key (its issuer name) is derived from it. */
export interface NativeRoute {
  /** Provider id (used when base_url is empty: "openai", "openai-codex", "anthropic"). */
  provider?: string;
  /** The API base URL, e.g. "https://api.openai.com/v1". */
  base_url?: string;
  /** The API shape; "codex_app_server" is the Codex app-server route. */
  api_mode?: "chat_completions" | "codex_responses" | "anthropic_messages" | "codex_app_server" | (string & {});
}

/** A native mechanism that can be disabled for a session by a rejection. */
export type NativeDisableable = "openai_compaction" | "anthropic_compaction";

/** The native-compaction session: data the host keeps (ContextEngine keeps it as state.native). */
export interface NativeSession {
  v: 1;
  /** The route key the last decision was for ("openai", "codex", "anthropic", "codex_app_server", "other:<host>", "other"). */
  route: string;
  /** Mechanisms the provider rejected in this session. */
  disabled: NativeDisableable[];
  /** Item key (a compaction item's id, or sha256:<16 hex>) -> the route key it was first seen on. */
  issuers: Record<string, string>;
  /** App-server compactions: one in flight, how many completed, the transcript length at each. */
  app_server: { pending: boolean; compactions: number; boundaries: number[] };
  /** "<model>@<threshold_tokens>" of the last autoraise notice shown, "" for none. */
  notice_shown: string;
  /** Keys of what prepare has handed over for archiving (each drop is archived once). */
  archived: string[];
}

export type NativeMechanism = "openai_compaction" | "anthropic_threshold" | "anthropic_on_demand" | "app_server" | "none";

/** Why native.policy decided what it did. */
export type NativePolicyReason =
  | "sent" | "not_enabled" | "model_not_eligible" | "route_not_eligible" | "not_responses_api" | "rejected"
  | "window_too_small" | "compact_now" | "armed" | "app_server_native" | "app_server_hermes" | "app_server_off" | "pending";

/** The app-server route's decision. */
export interface NativeAppServerDecision {
  mode: "native" | "hermes" | "off";
  /** Who starts the compaction: the app server, this host (thread/compact/start), or nobody. */
  initiator: "app_server" | "host" | "none";
  /** Send thread/compact/start now. */
  compact_now: boolean;
}

/** The one-time notice of the Codex gpt-5.5 autoraise. */
export interface NativeNotice {
  kind: "codex_autoraise";
  model: string;
  /** The threshold fraction before the raise. */
  from: number;
  /** The raised fraction (0.85). */
  to: number;
  /** Show it now (not shown yet for this model and threshold). */
  show: boolean;
}

/** native.policy's answer: what the next request carries, and why. */
export interface NativeDecision {
  /** The route key. */
  route: string;
  mechanism: NativeMechanism;
  reason: NativePolicyReason;
  /** Body fields to set, e.g. { context_management: [{ type: "compaction", compact_threshold: N }] }. */
  body: Record<string, unknown>;
  /** Body keys to delete when present (["context_management"] when the field is not sent). */
  remove: string[];
  /** anthropic-beta header values to send. */
  betas: string[];
  /** Start native compaction now (Anthropic on-demand, app-server "hermes", or manual). */
  compact_now: boolean;
  /** Anthropic on-demand: the body fields of the compaction request. */
  compaction_request: { compaction: { type: "summarize"; instructions?: string } } | null;
  /** The app-server decision, on that route only. */
  app_server: NativeAppServerDecision | null;
  /** Compaction items recorded from these issuers must not be sent. */
  drop_issuers: string[];
  /** The local compressor: armed (the fallback), whether it may rewrite the transcript, its threshold. */
  local: { armed: boolean; rewrite: boolean; threshold_tokens: number };
  /** The compact_threshold sent (0 when not applicable). */
  compact_threshold: number;
  notice: NativeNotice | null;
  /** The next session (the route recorded, notice_shown updated). */
  session: NativeSession;
}

/** A native item native.observe saw. */
export interface NativeSeen {
  kind: "openai_compaction" | "anthropic_compaction" | "app_server_compaction";
  /** The item key (an app-server compaction: its item id or turn id, "" when it has none). */
  key: string;
  /** The route key it is recorded under. */
  issuer: string;
}

/**
 * What native.observe made of it: recorded (compaction items seen), compaction_returned
 * (Anthropic stop_reason "compaction"), nothing (a response without one), rejected,
 * transient (retry as it was), compaction_started, compaction_completed,
 * turn_completed, compact_requested, unrelated.
 */
export type NativeObserveReason =
  | "recorded" | "compaction_returned" | "nothing" | "rejected" | "transient" | "compaction_started"
  | "compaction_completed" | "turn_completed" | "compact_requested" | "unrelated";

/** native.observe's answer. */
export interface NativeObservation {
  session: NativeSession;
  seen: NativeSeen[];
  /** The mechanism this error disabled, or null. */
  disabled: NativeDisableable | null;
  /** Send the request again: prepared anew, without the rejected field (rejected), or as it was (transient). */
  retry: boolean;
  reason: NativeObserveReason;
}

/** An app-server JSON-RPC message. */
export interface AppServerMessage {
  method: string;
  params?: unknown;
  [extra: string]: unknown;
}

/** Why native.trim dropped or rewrote a message. */
export type NativeTrimReason = "replaced" | "other_issuer" | "disabled" | "before_compaction";

/** native.trim's answer. */
export interface NativeTrimResult<M extends Item = Item> {
  /** The messages to send: your objects, except a replacement block and rewritten messages (new objects). */
  messages: M[];
  /** Every input index not kept, and why (other_issuer: another route's compaction item; disabled: a block of a mechanism the session turned off). */
  dropped: Array<{ index: number; reason: NativeTrimReason }>;
  /** The dropped messages (your objects, in the order of dropped): archive them, they are not lost. */
  dropped_messages: M[];
  /** Input indices kept but changed (an Anthropic message losing blocks; another issuer's block with a summary kept as text), each with your original. */
  rewritten: Array<{ index: number; reason: NativeTrimReason; original: M }>;
  changed: boolean;
}

// ---------------------------------------------------------------------------
// Options

export interface NativePolicyParams {
  /** Config for this call (the model is config.model.name), merged per section over the compactor's. */
  config?: Config;
  route?: NativeRoute;
  /** The session so far (absent: a fresh one). */
  session?: NativeSession | null;
  /** The prompt's current size, for who-initiates decisions. */
  tokens?: number;
  /** The user asked to compact now. */
  manual?: boolean;
}

export interface NativeObserveParams {
  config?: Config;
  route?: NativeRoute;
  session?: NativeSession | null;
  /** The provider's response object (Responses or Anthropic Message). */
  response?: object;
  /** A failed request: its HTTP status and body. */
  error?: { status: number; body: Record<string, unknown> | string | null };
  /** An app-server JSON-RPC message. */
  event?: AppServerMessage;
  /** The local transcript's length, recorded as an app-server compaction boundary. */
  messages_count?: number;
}

export interface NativeTrimParams {
  /** "responses" or "anthropic" (absent: detected). */
  format?: Format;
  session?: NativeSession | null;
  route?: NativeRoute;
  /** Drop what precedes the newest compaction item (default true). */
  drop_before_newest?: boolean;
  /** Anthropic on-demand: messages[0:count] become message (the returned compaction). */
  replace?: { count: number; message: object };
}

export interface CacheApplyParams {
  /** Anthropic top-level system value to mark too. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
  /** "anthropic" (top-level markers on tool rows) or "openai" (part markers, OpenRouter): where the request is sent. */
  layout?: "anthropic" | "openai";
  /** The messages' shape (absent: detected); a format without breakpoints (Gemini) is an invalid_request. */
  format?: Format;
  /** Marker TTL (default config.prompt_caching.cache_ttl). */
  ttl?: "5m" | "1h";
  /** Config for this call, merged per section over the compactor's. */
  config?: Config;
}

export interface CachePolicyParams {
  /** Model name (default config.model.name). */
  model?: string;
  /** Provider (default config.model.provider). */
  provider?: string;
  /** TTL (default config.prompt_caching.cache_ttl). */
  ttl?: "5m" | "1h";
  /** Config for this call, merged per section over the compactor's. */
  config?: Config;
}

export interface CacheSimulateParams {
  /** Strategy names to compare (default: all the core knows). */
  strategies?: string[];
  /** Layout of the markers. */
  layout?: "anthropic" | "openai";
  /** The messages' shape (absent: detected). */
  format?: Format;
  /** Model name (pricing and minimum cacheable length). */
  model?: string;
  /** TTL (default config.prompt_caching.cache_ttl). */
  ttl?: "5m" | "1h";
  /** Override the model's minimum cacheable prompt length. */
  min_cacheable_tokens?: number;
  /** Include one row per request. */
  per_request?: boolean;
  /** One time per message (RFC 3339 string, Unix seconds, or null) for TTL expiry. */
  timestamps?: Array<string | number | null>;
  /** Anthropic top-level system value. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
  /** Config for this call, merged per section over the compactor's. */
  config?: Config;
}

export interface CalibrateParams {
  /** Tokens of the prompt not in the messages (system prompt, tool schemas). */
  fixed_overhead?: number;
  /** An earlier observation: the first message_count messages were prompt_tokens. */
  baseline?: { message_count: number; prompt_tokens: number };
  /** Encoding to estimate with. */
  encoding?: string;
  /** Config for this call, merged per section over the compactor's. */
  config?: Config;
}

export interface CompactorOptions {
  /** The module: bytes, a URL (fetched, or read from disk for file:), a path (Node), or a compiled module; default the packaged wasm/ctxcompact.wasm. */
  wasm?: BufferSource | URL | string | WebAssembly.Module | Response;
  /** Default config for every call, validated by create(); a call's `config` is merged over it (config.merge). */
  config?: Config;
  /** Receives what the module writes to stdout (fd 1) and stderr (fd 2); nothing goes to the console. */
  debug?: (fd: 1 | 2, text: string) => void;
  /** Replace the instance after a call that grew its linear memory past this many bytes (default 64 MiB, as in Python and Go; 0 = never). */
  maxInstanceMemory?: number;
  /**
   * The exact encodings' rank tables (the files core/internal/bpe/vocab/<name>.bin of the package), which the module asks for on its first exact count.
   * Default: read from the package where node:fs exists (Node, Deno, Bun). In a browser, give the ones you count with (bytes, or a URL to fetch); without them an exact count is invalid_config.
   */
  vocabularies?: Partial<Record<"o200k_base" | "cl100k_base", BufferSource | URL | string | Response>>;
}

/** What a summarizer gets beside the request. */
export interface SummarizeContext {
  /** Aborted when the call times out (reason: a TimeoutError) or the caller's signal aborts: pass it to your fetch. */
  signal: AbortSignal;
}

/** Your LLM call: returns the summary text. Rejecting with an AbortError reports its own cancellation (fallback_code "cancelled"). */
export type Summarize = (request: SummaryRequest, context: SummarizeContext) => string | Promise<string>;

/** Request options the ready summarizers pass to the SDK call: the compaction's signal. */
export interface SummarizerRequestOptions {
  signal?: AbortSignal;
}

/**
 * What openaiSummarizer needs of an `openai` client (structural: the SDK itself is an
 * optional peer dependency, not needed to type-check).
 */
export interface OpenAIChatClientLike {
  chat: {
    completions: {
      create(
        body: {
          model: string;
          messages: Array<{ role: "system" | "user"; content: string }>;
          max_tokens?: number;
          max_completion_tokens?: number;
        },
        options?: SummarizerRequestOptions,
      ): PromiseLike<{ choices: ReadonlyArray<{ message?: { content?: string | null } | null }> }>;
    };
  };
}

/** What openaiSummarizer needs of an `openai` client for `api: "responses"`. */
export interface OpenAIResponsesClientLike {
  responses: {
    create(
      body: { model: string; instructions: string; input: string; max_output_tokens: number },
      options?: SummarizerRequestOptions,
    ): PromiseLike<{ output_text?: string; output?: ReadonlyArray<unknown> }>;
  };
}

/** What anthropicSummarizer needs of an `@anthropic-ai/sdk` client. */
export interface AnthropicClientLike {
  messages: {
    create(
      body: { model: string; system: string; messages: Array<{ role: "user"; content: string }>; max_tokens: number },
      options?: SummarizerRequestOptions,
    ): PromiseLike<{ content: ReadonlyArray<{ type: string; text?: string }> }>;
  };
}

export interface OpenAISummarizerOptions {
  /** The summary model, e.g. "gpt-4.1-mini". Names matching ^(o\d|gpt-5) get the size as max_completion_tokens. */
  model: string;
  /** "chat" (chat.completions, the default) or "responses" (the Responses API). */
  api?: "chat" | "responses";
  /** The summary's size in tokens, instead of the request's max_tokens (for reasoning models it also covers the reasoning). */
  maxTokens?: number;
}

export interface AnthropicSummarizerOptions {
  /** The summary model, e.g. "claude-haiku-4-5". */
  model: string;
  /** max_tokens, instead of the request's. */
  maxTokens?: number;
}

/**
 * A summarizer over an `openai` client: the template as the system message
 * (instructions for Responses), the size as max_tokens / max_completion_tokens /
 * max_output_tokens, the compaction's signal as the request option. A failed call
 * rejects (the compaction falls back); retries are the client's (maxRetries).
 */
export declare function openaiSummarizer(client: OpenAIChatClientLike, options: OpenAISummarizerOptions & { api?: "chat" }): Summarize;
export declare function openaiSummarizer(client: OpenAIResponsesClientLike, options: OpenAISummarizerOptions & { api: "responses" }): Summarize;
export declare function openaiSummarizer(client: OpenAIChatClientLike & OpenAIResponsesClientLike, options: OpenAISummarizerOptions): Summarize;

/** A summarizer over an `@anthropic-ai/sdk` client: the template as `system`, the size as max_tokens. */
export declare function anthropicSummarizer(client: AnthropicClientLike, options: AnthropicSummarizerOptions): Summarize;

export interface CompactOptions {
  /** Your LLM call; may be async, may reject or throw (the built-in fallback summary is used). Absent: the built-in extractive summarizer. */
  summarize?: Summarize;
  /** Compact even below the threshold. */
  force?: boolean;
  /** Config for this call, merged over the compactor's by the core (config.merge: per section, key by key). */
  config?: Config;
  /** API-reported prompt tokens of the last response (preferred over the estimate); a non-negative integer. */
  promptTokens?: number;
  /** The messages' shape; absent: Anthropic when `system` is given or tool_use/tool_result blocks appear. */
  format?: Format;
  /** Anthropic layout: the top-level system prompt (it counts as the first head message and gets the compaction note). */
  system?: string | ContentPart[] | GeminiSystemInstruction;
  /** What to keep in detail (at most 1,000 bytes): the summary request asks for it; the built-in summary and the facts index put what matches it first (docs/STEERING.md). */
  focus?: string;
  /** How long the summarizer may take, in ms (default 120000; Infinity: no limit). Past it, the fallback summary is used (fallback_code "timeout"). */
  timeoutMs?: number;
  /** Cancels the call: compact rejects with `signal.reason` and sends nothing more to the core. */
  signal?: AbortSignal;
  /** Messages kept verbatim, never summarized or pruned: input indexes and tool call ids (a pin takes the whole tool group; docs/STEERING.md "Pins"). */
  pins?: Array<number | string>;
  /** A range compaction: summarize exactly the messages [from, to) (input indexes), whatever the trigger; it must not split a tool group (docs/STEERING.md). */
  range?: { from: number; to: number };
}

export interface ShouldCompressOptions {
  /** Config for this call, merged over the compactor's. */
  config?: Config;
  /** The breaker: tokens_after of the last compaction when it did not fit, else omit. */
  lastCompactionTokens?: number;
}

export interface HygieneOptions {
  /** Config for this call, merged over the compactor's. */
  config?: Config;
  /** API-reported prompt tokens, preferred over the estimate. */
  promptTokens?: number;
}

export interface CountTokensOptions {
  /** Encoding to count with (default: config.tokens.encoding). */
  encoding?: string;
  /** Config for this call, merged over the compactor's. */
  config?: Config;
  /** The messages' shape (absent: detected). */
  format?: Format;
  /** A format's top-level system prompt (Responses instructions, Gemini systemInstruction), counted in total. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
}

export interface PruneOptions {
  /** Config for this call, merged over the compactor's. */
  config?: Config;
  /** The messages' shape (absent: detected). */
  format?: Format;
  /** A format's top-level system prompt. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
}

export interface SanitizeOptions {
  /** The messages' shape (absent: detected). */
  format?: Format;
}

/** Options of validate(). */
export interface ValidateOptions extends SanitizeOptions {
  /** The provider whose rules AI SDK messages are checked against (docs/RULES.md); other formats go to their own. Absent: the one config.model.provider names. */
  provider?: "anthropic" | "openai" | "gemini";
  /** Merged over the compactor's config; its model.provider names the AI SDK rule set when `provider` is absent. */
  config?: Config;
}

/** The engine state: a JSON object to persist between runs (its keys are the core's). */
export interface EngineState {
  v: number;
  config: Config;
  /** The route, as updateModel last set it. */
  base_url?: string;
  api_mode?: string;
  /** The native-compaction session (absent until the first prepareRequest or observe*). */
  native?: NativeSession;
  [key: string]: unknown;
}

export interface EngineOptions {
  /** Config of this engine, merged over the compactor's; validated here. */
  config?: Config;
  /** The summarizer compress() uses (absent: the built-in one). */
  summarize?: Summarize;
  /** A saved `engine.state` to go on from (it carries its config: give config or state). */
  state?: EngineState;
  /** compress()'s default summarizer timeout in ms (default 120000). */
  timeoutMs?: number;
  /**
   * The recall store of the lossless engine (`await RecallStore.open(path)`, or
   * `await openRecallStore(url)` from ctxcompact/recall); required with context.engine
   * "lossless". A PostgresRecallStore answers with promises: the engine's tool calls
   * then go through handleToolCallAsync.
   */
  store?: RecallStore | PostgresRecallStore;
  /** The session the store keeps this engine's archived ranges under; required with context.engine "lossless". */
  sessionId?: string;
}

/** A context tool's schema, in the shape getToolSchemas(format) asks for. */
export type ContextToolSchema = OpenAIChatToolSchema | ResponsesToolSchema | AnthropicToolSchema;

export interface OpenAIChatToolSchema {
  type: "function";
  function: { name: ContextToolName; description: string; parameters: Record<string, unknown> };
}

export interface ResponsesToolSchema {
  type: "function";
  name: ContextToolName;
  description: string;
  parameters: Record<string, unknown>;
}

export interface AnthropicToolSchema {
  name: ContextToolName;
  description: string;
  input_schema: Record<string, unknown>;
}

export type ContextToolName = "context_search" | "context_expand";

/** context_search's result (handleToolCall returns it as JSON text). */
export interface ContextSearchResult {
  query: string;
  /** Newest first. */
  hits: ContextSearchHit[];
  /** How many archived rows of the session match in all. */
  total: number;
}

export interface ContextSearchHit {
  /** A message id (r2.17) or a summary id (r2.summary): pass it to context_expand. */
  id: string;
  /** The range (r2). */
  range: string;
  /** The message's role, or "summary". */
  role: string;
  /** Its index in the conversation the compaction saw. */
  position: number;
  /** About 200 characters around the first match. */
  snippet: string;
}

/** context_expand's result (handleToolCall returns it as JSON text; the messages are the originals byte for byte). */
export interface ContextExpandResult {
  id: string;
  messages: Message[];
  /** true when max_tokens cut the answer (see note). */
  truncated: boolean;
  note?: string;
}

/** A tool result for bad arguments, an unknown tool or an unknown id. */
export interface ContextToolError {
  error: string;
}

/** ContextEngine.create: a compactor's options and an engine's. */
export interface ContextEngineOptions extends Omit<CompactorOptions, "config">, EngineOptions {}

export interface CompressOptions {
  /** API-reported prompt tokens (default: the last reported, when above 0). */
  currentTokens?: number;
  /** Added to the summarizer's instructions: give priority to this topic (host summarizers only). */
  focusTopic?: string;
  /** What a memory provider knows, added to the summarizer's instructions (host summarizers only). */
  memoryContext?: string;
  /** Compact even below the threshold. */
  force?: boolean;
  /** Summarizer timeout in ms (default: the engine's). */
  timeoutMs?: number;
  /** Cancels the call (compact rejects with its reason; nothing is recorded). */
  signal?: AbortSignal;
  /** The messages' shape (absent: detected). */
  format?: Format;
  /** Anthropic layout: the top-level system prompt. */
  system?: string | ContentPart[] | GeminiSystemInstruction;
  /** Messages kept verbatim, never summarized or pruned: input indexes and tool call ids; the engine keeps them pinned in later compactions too (docs/STEERING.md "Pins"). */
  pins?: Array<number | string>;
  /** A range compaction: summarize exactly the messages [from, to) (input indexes), whatever the trigger; it must not split a tool group (docs/STEERING.md). */
  range?: { from: number; to: number };
}

/** prepareCompaction()'s options: compress()'s but force. */
export type PrepareCompactionOptions = Omit<CompressOptions, "force" | "range">;

/** What prepareCompaction() kept: the conversation's first `messages` messages, summarizing [head_end, tail_start); null, with the reason, when nothing was kept. */
export interface PrepareCompactionResult {
  prepared: { messages: number; head_end: number; tail_start: number } | null;
  reason?: string;
}

export interface PrepareRequestOptions {
  /** The prompt's current size (default: the last reported prompt tokens). */
  tokens?: number;
  /** The user asked to compact now. */
  manual?: boolean;
}

/** What nativePrepare returns (native.prepare's result, as the core writes it). */
export interface NativePrepared<B extends object = Record<string, unknown>> {
  body: B;
  betas: string[];
  /** The body of an Anthropic on-demand compaction due now, or null. */
  compaction_body: (B & { compaction: { type: "summarize"; instructions?: string } }) | null;
  decision: NativeDecision;
  trimmed: NativePreparedTrim;
}

/** What native.prepare left out of the body's list ("input" or "messages"). */
export interface NativePreparedTrim {
  list: string;
  dropped: Array<{ index: number; reason: NativeTrimReason }>;
  dropped_messages: Item[];
  rewritten: Array<{ index: number; reason: NativeTrimReason; original: Item }>;
  /** What of it the session has not handed over before: archive it once. */
  archive: Array<{ index: number; reason: NativeTrimReason; message: Item }>;
}

/** What prepareRequest returns (native.prepare). */
export interface PreparedRequest<B extends object = Record<string, unknown>> {
  /**
   * A new body: the OpenAI field set (or removed where it must not go), Anthropic's
   * compaction edit merged into the body's own context_management edits, the list
   * trimmed of other issuers' compaction items and what precedes the newest one.
   */
  body: B;
  /** anthropic-beta header values to send with it (beside your own). */
  betas: string[];
  decision: NativeDecision;
  /** What was left out of the body's list ("input" or "messages"). */
  trimmed: NativePreparedTrim & {
    /** The range a lossless engine archived `archive` under (r<k>), else null. */
    archivedAs: string | null;
  };
  /**
   * The body of an Anthropic on-demand compaction due now (the conversation with
   * `compaction: {type: "summarize"}`, without context_management), or null. Send it,
   * then swap the returned block in with nativeTrim's `replace`.
   */
  compactionBody: (B & { compaction: { type: "summarize"; instructions?: string } }) | null;
}

export interface UpdateModelOptions {
  provider?: string;
  /** Kept in the engine state. */
  baseUrl?: string;
  /** Accepted for the Hermes signature; never stored or sent. */
  apiKey?: string;
  /** Kept in the engine state. */
  apiMode?: string;
}

/** A usage object as an SDK returns it: OpenAI chat, OpenAI Responses, Anthropic, AI SDK or Gemini (the core normalises it). */
export interface Usage {
  /** OpenAI chat prompt tokens (cached included). */
  prompt_tokens?: number;
  /** OpenAI chat completion tokens. */
  completion_tokens?: number;
  total_tokens?: number;
  /** Anthropic uncached input tokens, or OpenAI Responses input tokens. */
  input_tokens?: number;
  /** Anthropic / Responses output tokens. */
  output_tokens?: number;
  /** Anthropic cache-read input tokens. */
  cache_read_input_tokens?: number;
  /** Anthropic cache-write input tokens. */
  cache_creation_input_tokens?: number;
  /** AI SDK (v5: a number or { total }). */
  inputTokens?: number | { total?: number; [extra: string]: unknown };
  outputTokens?: number | { total?: number; [extra: string]: unknown };
  totalTokens?: number;
  /** AI SDK v4. */
  promptTokens?: number;
  completionTokens?: number;
  /** Gemini usageMetadata. */
  promptTokenCount?: number;
  candidatesTokenCount?: number;
  thoughtsTokenCount?: number;
  totalTokenCount?: number;
  [extra: string]: unknown;
}

/** What updateFromResponse recorded. */
export interface EngineUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** The shape it was read as. */
  source: "openai" | "responses" | "anthropic" | "ai-sdk" | "gemini" | "none";
}

/** What getStatus() returns (the core's engine status). */
export interface EngineStatus {
  name: "ctxcompact";
  model: string;
  provider: string;
  context_length: number;
  threshold_tokens: number;
  threshold_percent: number;
  threshold_rule: ThresholdRule;
  last_prompt_tokens: number;
  last_completion_tokens: number;
  last_total_tokens: number;
  /** last_prompt_tokens as a percentage of the window, at most 100. */
  usage_percent: number;
  compression_count: number;
  /** tokens_after of the last compaction when it did not fit (the trigger is held back), else null. */
  breaker_tokens: number | null;
  /** null before the first compaction. */
  last_compaction_fits: boolean | null;
  last_fallback_used: boolean | null;
  last_fallback_code: FallbackCode | null;
  /** true while the agent's compact_now waits for the next compaction (shouldCompress then says "requested"). */
  compaction_requested: boolean;
  /** What the last compaction did, its summary's text included (absent before the first). */
  last_compaction?: {
    compacted: boolean; reason: string; fits: boolean; tokens_after: number; fallback_used: boolean; fallback_code: string;
    tokens_before?: number; summarized?: { from: number; to: number }; pruned?: number; summary?: string;
  };
  /** Whether undo() can take the last compaction back. */
  can_undo: boolean;
}

// ---------------------------------------------------------------------------
// API

/**
 * One loaded module and one instance. Loading is async; pure ops are sync; compact is
 * async only because the summarizer may be. Concurrent compactions on one compactor
 * are fine. A trapped instance is replaced; the call that trapped throws CompactError
 * code "internal" (it is not retried).
 */
export declare class Compactor {
  private constructor();
  /** Loads (compiling once per process for the packaged module), checks and instantiates. */
  static create(options?: CompactorOptions): Promise<Compactor>;
  /** The compiled module; pass it as `wasm` to skip compiling again. */
  readonly module: WebAssembly.Module;
  /** The default config given to create(). */
  readonly config: Config | undefined;
  readonly closed: boolean;
  /** Releases the instance; later calls throw ErrClosed. */
  close(): void;
  /** Resolves when the compactor can take calls (after a trap, once the replacement is up). */
  ready(): Promise<void>;
  /** Request envelope JSON in, response envelope JSON out, unparsed. */
  callRaw(request: string): string;
  /** Runs any op; returns its result or throws CompactError. */
  call<T = unknown>(op: string, params?: Record<string, unknown>): T;
  info(): InfoResult;
  resolveThreshold(config?: Config): ThresholdResult;
  shouldCompress(promptTokens: number, options?: ShouldCompressOptions): ShouldCompressResult;
  hygieneCheck(messages: Item[], options?: HygieneOptions): HygieneResult;
  /**
   * Token count per message and in total. Counts are kept per message object, so
   * counting a conversation again after appending a message sends only the new
   * one to the module; a message edited in place is seen (each lookup compares it
   * with what was counted) and counted again. Only plain data (object literals,
   * JSON.parse output) is kept; other messages are counted on every call, as are
   * calls with a format or a system.
   */
  countTokens(messages: Item[], options?: CountTokensOptions): TokenCountResult;
  prune<M extends Item>(messages: M[], options?: PruneOptions): PruneResult<M>;
  sanitize<M extends Item>(messages: M[], options?: SanitizeOptions): SanitizeResult<M>;
  validate(messages: Item[], options?: ValidateOptions): ValidateResult;
  compact<M extends Item>(messages: M[], options?: CompactOptions): Promise<CompactResult<M>>;
  /** Places Anthropic cache_control breakpoints (system_and_3); the input is not mutated. */
  cacheApply<M extends Item>(messages: M[], params?: CacheApplyParams): CacheApplyResult<M>;
  /** Whether prompt caching applies, with a status line. */
  cachePolicy(params?: CachePolicyParams): CachePolicyResult;
  /** Replays the conversation request by request and prices cache strategies. */
  cacheSimulate(messages: Item[], params?: CacheSimulateParams): CacheSimulateResult;
  /** A calibration factor for estimates from the API-reported prompt tokens. */
  calibrate(messages: Item[], promptTokens: number, params?: CalibrateParams): CalibrateResult;
  /** A context engine over this compactor (config merged over the compactor's, or a saved state). */
  engine(options?: EngineOptions): ContextEngine;
  /** Provider-native compaction: what the next request carries for the route, and why. */
  nativePolicy(params?: NativePolicyParams): NativeDecision;
  /** The decision applied to a request body (native.prepare): fields set or merged, the list trimmed. */
  nativePrepare<B extends object>(body: B, params?: NativePolicyParams): NativePrepared<B>;
  /** Updates a native-compaction session from a response, an error or an app-server event. */
  nativeObserve(params?: NativeObserveParams): NativeObservation;
  /** Drops other issuers' compaction items and what precedes the newest one. */
  nativeTrim<M extends Item>(messages: M[], params?: NativeTrimParams): NativeTrimResult<M>;
}

/** The default summarizer timeout of compact(), in ms (2 minutes). */
export declare const DEFAULT_TIMEOUT_MS: 120000;

/**
 * The context engine (the Hermes method set): a thin wrapper over the core's engine
 * ops, which hold the rules (usage normalisation, the breaker, model switches).
 * Fields read the status of the last op.
 */
export declare class ContextEngine {
  private constructor();
  /** A compactor and an engine over it. */
  static create(options?: ContextEngineOptions): Promise<ContextEngine>;
  readonly compactor: Compactor;
  /** The engine state (a copy): persist it, restore with `compactor.engine({ state })`. */
  readonly state: EngineState;
  /** The config compactions use (the state's). */
  readonly config: Config;
  /** Whether config context.engine is "lossless". */
  readonly lossless: boolean;
  readonly store: RecallStore | PostgresRecallStore | undefined;
  readonly sessionId: string | undefined;
  readonly name: "ctxcompact";
  readonly model: string;
  readonly provider: string;
  readonly contextLength: number;
  readonly thresholdTokens: number;
  readonly thresholdPercent: number;
  readonly thresholdRule: ThresholdRule;
  readonly lastPromptTokens: number;
  readonly lastCompletionTokens: number;
  readonly lastTotalTokens: number;
  readonly usagePercent: number;
  readonly compressionCount: number;
  readonly breakerTokens: number | null;
  readonly lastCompactionFits: boolean | null;
  readonly lastFallbackUsed: boolean | null;
  readonly lastFallbackCode: FallbackCode | null;
  /** Records the usage of a model response (null/undefined/{}: nothing recorded). */
  updateFromResponse(usage: Usage | null | undefined): EngineUsage;
  /** Whether the last reported (or given) prompt size calls for compaction; the breaker holds it back. */
  shouldCompress(promptTokens?: number): boolean;
  /** Whether to start prepareCompaction() now: the prompt is at compression.prepare_ratio of the threshold but below it, and none is prepared (or it is old). */
  shouldPrepare(promptTokens?: number): boolean;
  /** Summarizes the messages ahead of the trigger and keeps the compaction; compress() at the trigger splices it into the grown conversation without calling the summarizer (docs/STEERING.md). */
  prepareCompaction(messages: Item[], options?: PrepareCompactionOptions): Promise<PrepareCompactionResult>;
  /** Takes the last compaction back: the conversation as it is now (starting with that compaction's result) in, the compaction's input and what came after out (docs/STEERING.md "See and undo"). */
  undo(messages: Item[]): Promise<Item[]>;
  /** Compacts with the state's config, the last prompt tokens and the summarizer, then records the report. */
  compress<M extends Item>(messages: M[], options?: CompressOptions): Promise<CompactResult<M>>;
  /** Switches the model (threshold re-resolved, breaker cleared). */
  updateModel(model: string, contextLength: number, options?: UpdateModelOptions): void;
  /** /new or /reset: counters, usage, breaker zeroed; config kept. */
  onSessionReset(): void;
  /**
   * Provider-native compaction for the next request on the engine's route: a new body
   * with the decision applied (fields set, `remove` keys deleted, other issuers'
   * compaction items dropped from `input` / `messages`), the beta headers, the decision.
   */
  prepareRequest<B extends object>(body: B, options?: PrepareRequestOptions): PreparedRequest<B>;
  /**
   * Anthropic on-demand compaction, finished: the response's compaction block swapped
   * in for the first `count` messages (default: all); a lossless engine archives the
   * summarized ones (`archivedAs`).
   */
  applyCompaction<M extends Item>(messages: M[], response: object, options?: { count?: number }): NativeTrimResult<M> & { archivedAs: string | null };
  /** Records the compaction items of a provider response (usage is updateFromResponse's). */
  observeResponse(response: object): NativeObservation;
  /** Records a failed request: a rejection of the native field disables it; `retry` says to send again. */
  observeError(status: number, body?: Record<string, unknown> | string | null): NativeObservation;
  /** The same from an `openai` or `@anthropic-ai/sdk` APIError (its status and error body; one without a status throws invalid_request). */
  observeError(error: { status: number | undefined; error?: unknown }): NativeObservation;
  /** Records an app-server JSON-RPC message (messagesCount: the transcript's length, the compaction boundary). */
  observeEvent(message: AppServerMessage, messagesCount?: number): NativeObservation;
  /** The status of the last op (a copy). */
  getStatus(): EngineStatus;
  /** The context tools' schemas: context_status and compact_now (docs/STEERING.md), after context_search and context_expand in lossless mode. */
  getToolSchemas(format?: "openai"): OpenAIChatToolSchema[];
  getToolSchemas(format: "responses"): ResponsesToolSchema[];
  getToolSchemas(format: "anthropic"): AnthropicToolSchema[];
  /**
   * Runs a context tool call: args an object or its JSON text. Returns the result as
   * JSON text: a ContextSearchResult, a ContextExpandResult, context_status's meter,
   * compact_now's {ok, message}, or a ContextToolError.
   */
  handleToolCall(name: string, args?: Record<string, unknown> | string | null): string;
  /** handleToolCall with the store's answers awaited: any store, and the one way for a PostgresRecallStore. */
  handleToolCallAsync(name: string, args?: Record<string, unknown> | string | null): Promise<string>;
}
