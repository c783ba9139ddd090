"""Typed shapes of the wire contract (docs/OPS.md). Keys equal the JSON wire names,
so a dict from the core is one of these as it is, and a config written as a plain
dict type-checks. Keys that are Python keywords ("from") use the functional form."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

__all__ = [
    "Format",
    "ResponsesItem",
    "AISDKMessage",
    "AISDKPart",
    "GeminiContent",
    "GeminiPart",
    "Message",
    "CompressionConfig",
    "PromptCachingConfig",
    "ModelConfig",
    "TokensConfig",
    "Config",
    "IndexRange",
    "SummaryRequest",
    "CompactReport",
    "ArchivedMessage",
    "CompactResult",
    "ThresholdResult",
    "ShouldCompressResult",
    "HygieneResult",
    "TokenCountResult",
    "PruneResult",
    "SanitizeResult",
    "Problem",
    "ValidateResult",
    "InfoResult",
    "EngineStatus",
    "UsageRecord",
    "ContextConfig",
    "RecallQuery",
    "RecallRange",
    "RecallMessageRow",
    "ArchiveRows",
    "SearchHit",
    "StoredMessage",
    "SearchResultHit",
    "SearchResult",
    "ExpandResult",
    "NativeRoute",
    "NativeAppServerState",
    "NativeSession",
    "NativeAppServerDecision",
    "NativeLocal",
    "NativeNotice",
    "NativeDecision",
    "NativeSeen",
    "NativeObservation",
    "NativeDropped",
    "NativeRewritten",
    "NativeTrimReplace",
    "NativeTrimResult",
    "NativeRequest",
    "NativeErrorOutcome",
]

class ResponsesItem(TypedDict, total=False):
    """An OpenAI Responses input item (format "responses"): a message
    ``{type?: "message", role, content, phase?}``, a ``function_call {call_id, name,
    arguments}``, a ``function_call_output {call_id, output}``, or another item type
    (reasoning, compaction, custom_tool_call, ...), which is kept byte for byte."""

    type: str
    role: str
    content: Union[str, List[Dict[str, Any]]]
    phase: str
    call_id: str
    name: str
    arguments: str
    output: Union[str, List[Dict[str, Any]]]
    id: str
    status: str
    encrypted_content: str


class AISDKPart(TypedDict, total=False):
    """A content part of a Vercel AI SDK message: text, image, file, reasoning,
    tool-call {toolCallId, toolName, input}, tool-result {toolCallId, toolName,
    output: {type, value}}, tool-approval-request/-response, custom."""

    type: str
    text: str
    toolCallId: str
    toolName: str
    input: Any
    output: Dict[str, Any]
    providerOptions: Dict[str, Any]


class AISDKMessage(TypedDict, total=False):
    """A Vercel AI SDK ModelMessage (format "ai-sdk"); cache breakpoints go in
    ``providerOptions.anthropic.cacheControl``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: Union[str, List[AISDKPart]]
    providerOptions: Dict[str, Any]


class GeminiPart(TypedDict, total=False):
    """A part of a Gemini Content: text (thought), inlineData, fileData,
    functionCall {id?, name, args}, functionResponse {id?, name, response}; a
    thoughtSignature stays on the part it came on."""

    text: str
    thought: bool
    thoughtSignature: str
    inlineData: Dict[str, Any]
    fileData: Dict[str, Any]
    functionCall: Dict[str, Any]
    functionResponse: Dict[str, Any]


class GeminiContent(TypedDict):
    """A Gemini Content (format "gemini"): ``{role: "user"|"model", parts}``. Pass
    ``systemInstruction`` as ``system``."""

    role: Literal["user", "model"]
    parts: List[GeminiPart]


#: A message format: OpenAI chat ("openai", alias "openai-chat"), Anthropic Messages
#: ("anthropic", alias "anthropic-messages"), OpenAI Responses items ("responses",
#: alias "openai-responses"), Vercel AI SDK messages ("ai-sdk") or Gemini contents
#: ("gemini").
Format = Literal[
    "openai",
    "openai-chat",
    "anthropic",
    "anthropic-messages",
    "responses",
    "openai-responses",
    "ai-sdk",
    "gemini",
]

#: An OpenAI chat message (role, content, tool_calls, tool_call_id, ...). Any extra
#: keys are preserved byte for byte by the core.
Message = Dict[str, Any]


class CompressionConfig(TypedDict, total=False):
    enabled: bool
    threshold: float
    model_thresholds: Dict[str, float]
    target_ratio: float
    tail_mode: Literal["tiered", "legacy", "lean"]
    prune_first: bool
    protect_first_n: int
    protect_last_n: int
    min_tail_user_messages: int
    codex_gpt55_autoraise: bool
    small_context_floor: float
    small_context_limit: int
    hygiene_threshold: float
    summary_context_length: int
    #: standing guidance added to every summary request (at most 8,000 bytes;
    #: docs/STEERING.md).
    instructions: str
    prepare_ratio: float
    #: provider-native compaction (issue 16, docs/OPS.md "native.*"): opt in to
    #: OpenAI server-side compaction (gpt-5.6 family on api.openai.com or the Codex
    #: backend) and its configured threshold (default 200000).
    codex_responses_native: bool
    codex_responses_compact_threshold: int
    #: who starts compaction on the Codex app-server route (default "native").
    codex_app_server_auto: Literal["native", "hermes", "off"]
    #: show the one-time notice when the Codex gpt-5.5 autoraise applies.
    codex_gpt55_autoraise_notice: bool
    #: Anthropic server-side compaction: the compact_20260112 edit ("threshold") or
    #: the compaction request ("on_demand"); default "off".
    anthropic_native: Literal["off", "threshold", "on_demand"]
    #: instructions for Anthropic's summarizer ("" = the server's own prompt).
    anthropic_compact_instructions: str


class PromptCachingConfig(TypedDict, total=False):
    cache_ttl: Literal["5m", "1h"]


class ModelConfig(TypedDict, total=False):
    name: str
    provider: str
    context_length: int


class TokensConfig(TypedDict, total=False):
    encoding: str
    calibration: float


class ContextConfig(TypedDict, total=False):
    #: "compressor" (default: compaction only) or "lossless" (a ContextEngine with a
    #: store archives every compaction's originals; see RecallStore).
    engine: Literal["compressor", "lossless"]
    #: input messages one part of a lossless archive spans (default 8,192;
    #: docs/SESSION.md "An archive in parts").
    archive_part: int


class Config(TypedDict, total=False):
    """The config object of every op. All keys are optional; unknown keys are an
    ``invalid_config`` error. ``model.context_length`` defaults to 200000."""

    compression: CompressionConfig
    prompt_caching: PromptCachingConfig
    model: ModelConfig
    tokens: TokensConfig
    context: ContextConfig


IndexRange = TypedDict("IndexRange", {"from": int, "to": int})


class SummaryRequest(TypedDict):
    """What compact.begin asks the summarizer for: send ``messages`` to an LLM with
    ``max_tokens`` and return its text."""

    messages: List[Message]
    target_tokens: int
    max_tokens: int
    iterative: bool
    middle: IndexRange


class Anchor(TypedDict):
    kind: Literal["file", "request", "error"]
    value: str


class CompactReport(TypedDict, total=False):
    compacted: bool
    reason: str
    tokens_before: int
    tokens_after: int
    threshold_tokens: int
    fits: bool
    messages_before: int
    messages_after: int
    head_end: int
    tail_start: int
    pruned: List[int]
    summarized: Optional[IndexRange]
    summary_role: Literal["user", "assistant", "merged", ""]
    summary_merged_into: Optional[int]
    summary_tokens: int
    #: summary requests the summary took when its turns did not fit the
    #: summarizer's window in one (a context engine's compress); absent: one.
    summary_chunks: int
    #: the summary was prepared ahead of the trigger (prepare_compaction) and
    #: spliced into the grown conversation.
    prepared: bool
    #: input indexes of the messages kept verbatim for a pin (absent: none).
    pinned: List[int]
    summarizer: Literal["host", "builtin", ""]
    fallback_used: bool
    fallback_reason: str
    #: why the fallback was used, as a code: "" (not used), "timeout", "error",
    #: "empty", "too_long" or "cancelled"; fallback_reason is the text.
    fallback_code: Literal["", "timeout", "error", "empty", "too_long", "cancelled"]
    iterative: bool
    active_request_in_summary: bool
    summary_truncated: bool
    anchors_added: List[Anchor]
    first_changed_index: Optional[int]
    system_note_added: bool
    orphans_removed: List[int]
    stubs_added: List[str]
    repaired: List[int]
    #: the factor the token counts were scaled by: config["tokens"]["calibration"],
    #: else the model family's prior (docs/TOKENS.md), else 1
    calibration: float
    #: where it came from: "config", "prior:<family>" (e.g. "prior:claude") or "none"
    calibration_source: str


class ArchivedMessage(TypedDict):
    """An input message that is not in the result unchanged. ``message`` is the
    caller's own object (the binding fills it in from the input by ``index``).
    A system prompt that gained the compaction note is archived too, with reason
    ``system_note`` (the result holds the changed copy)."""

    index: int
    reason: Literal["summarized", "pruned", "merged", "orphan_removed", "system_note", "repaired"]
    message: Message


class CompactResult:
    """What ``compact``/``acompact`` return.

    ``messages`` is the compacted list: unchanged messages are the caller's own
    dict objects (not copies), new or changed ones are fresh dicts. ``report`` says
    what was done. ``archived`` lists every input message that was summarized,
    pruned or removed, with its original object, so a host can soft-archive it.

    (A plain class with slots rather than a dataclass: importing dataclasses costs
    ~8 ms of start-up.)"""

    __slots__ = ("messages", "report", "archived", "system")

    def __init__(
        self,
        messages: List[Message],
        report: CompactReport,
        archived: Optional[List[ArchivedMessage]] = None,
        system: Any = None,
    ) -> None:
        self.messages = messages
        self.report = report
        self.archived: List[ArchivedMessage] = archived if archived is not None else []
        #: Anthropic layout: the top-level system prompt to send with ``messages``
        #: (with the compaction note when one was added); None otherwise.
        self.system = system

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CompactResult):
            return NotImplemented
        return (self.messages, self.report, self.archived) == (other.messages, other.report, other.archived)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"CompactResult(messages=<{len(self.messages)} messages>, report={self.report!r}, "
            f"archived=<{len(self.archived)} archived>)"
        )


class ThresholdResult(TypedDict):
    context_length: int
    fraction: float
    rule: str
    override_key: str
    floor_applied: bool
    autoraised: bool
    threshold_tokens: int
    tail_token_budget: int
    tail_rule: str
    max_summary_tokens: int
    hygiene_tokens: int


class ShouldCompressResult(TypedDict):
    should_compress: bool
    prompt_tokens: int
    threshold_tokens: int
    reason: str


class HygieneResult(TypedDict):
    should_compact: bool
    tokens: int
    source: Literal["reported", "estimate"]
    threshold_tokens: int
    messages: int
    reason: str


class TokenCountResult(TypedDict):
    encoding: str
    #: config["tokens"]["calibration"], else the model family's prior, else 1
    calibration: float
    #: "config", "prior:<family>" or "none"
    calibration_source: str
    total: int
    per_message: List[int]


class PruneResult(TypedDict):
    messages: List[Message]
    pruned: List[int]
    archived: List[ArchivedMessage]
    tokens_before: int
    tokens_after: int


class SanitizeResult(TypedDict):
    messages: List[Message]
    removed: List[int]
    stubbed: List[str]
    repaired: List[int]
    archived: List[ArchivedMessage]


class Problem(TypedDict):
    code: str
    path: str
    message: str


class ValidateResult(TypedDict):
    ok: bool
    problems: List[Problem]


class InfoResult(TypedDict):
    name: str
    version: str
    ops: List[str]
    error_codes: List[str]
    encodings: List[str]


class _EngineStatusLater(TypedDict, total=False):
    """The keys of an engine status that are there once something happened."""

    #: what the last compaction did, its summary's text included (absent before the first).
    last_compaction: Dict[str, Any]


class EngineStatus(_EngineStatusLater):
    """What ``ContextEngine.get_status()`` returns (the core's engine status; the
    engine's fields are copied from it after every call)."""

    name: str
    model: str
    provider: str
    context_length: int
    threshold_tokens: int
    threshold_percent: float
    threshold_rule: str
    last_prompt_tokens: int
    last_completion_tokens: int
    last_total_tokens: int
    usage_percent: float
    compression_count: int
    #: tokens_after of the last compaction when it did not fit (the breaker holds
    #: a trigger back at that size); None when it fit or after a model switch.
    breaker_tokens: Optional[int]
    last_compaction_fits: Optional[bool]
    last_fallback_used: Optional[bool]
    last_fallback_code: Optional[str]
    #: True while the agent's compact_now waits for the next compaction
    #: (should_compress then says "requested").
    compaction_requested: bool
    #: whether undo can take the last compaction back.
    can_undo: bool


class UsageRecord(TypedDict):
    """engine.usage's reading of an API usage object: the counts recorded and
    which shape it was read as."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    source: Literal["openai", "responses", "anthropic", "ai-sdk", "gemini", "none"]


# --- lossless recall (RecallStore, ContextEngine tools) ------------------------------------


class RecallQuery(TypedDict):
    """recall.query's plan of a search: the terms, the FTS5 MATCH expression (""
    when no term has 3 characters) and a LIKE pattern per term."""

    terms: List[str]
    fts: str
    like: List[str]


class RecallRange(TypedDict):
    """A row of ctxc_ranges: one compaction, the summarized range [from_index,
    to_index) of its input and the summary's text."""

    id: str
    from_index: int
    to_index: int
    summary: str


class RecallMessageRow(TypedDict):
    """A row recall.archive makes for ctxc_messages: ``json`` is the original
    message JSON, ``text`` what search reads."""

    id: str
    range_id: str
    position: int
    role: str
    reason: str
    json: str
    text: str


class ArchiveRows(TypedDict):
    """recall.archive's result, what RecallStore.archive inserts."""

    range: RecallRange
    rows: List[RecallMessageRow]


class SearchHit(TypedDict):
    """A row that matched a search (RecallStore.search_rows), newest first."""

    id: str
    range_id: str
    position: int
    role: str
    text: str


class StoredMessage(TypedDict):
    """An archived row behind an id (RecallStore.messages)."""

    id: str
    range_id: str
    position: int
    role: str
    reason: str
    json: str


class SearchResultHit(TypedDict):
    id: str
    range: str
    role: str
    position: int
    snippet: str


class SearchResult(TypedDict, total=False):
    """The result of context_search (parsed): ``hits`` newest first, ``total``
    every match; ``error`` instead when the call was refused."""

    query: str
    hits: List[SearchResultHit]
    total: int
    error: str


class ExpandResult(TypedDict, total=False):
    """The result of context_expand (parsed): the original messages; with
    ``max_tokens`` they may be cut (``truncated`` true and a ``note``); ``error``
    instead for an unknown id or a bad call."""

    id: str
    messages: List[Message]
    truncated: bool
    note: str
    error: str


# --- provider-native compaction (native.policy, native.observe, native.trim) --------------


class NativeRoute(TypedDict, total=False):
    """Where the next request goes: ``api_mode`` is one of ``chat_completions``,
    ``codex_responses``, ``anthropic_messages``, ``codex_app_server`` (others are
    kept as given). The route key (``openai``, ``codex``, ``anthropic``,
    ``codex_app_server``, ``other:<host>``) is the core's reading of it."""

    provider: str
    base_url: str
    api_mode: str


class NativeAppServerState(TypedDict, total=False):
    """The app-server bookkeeping of a session: a compaction in flight, how many
    completed, and the message counts at each boundary."""

    pending: bool
    compactions: int
    boundaries: List[int]


class NativeSession(TypedDict, total=False):
    """The session of provider-native compaction: data the host keeps (the
    ContextEngine keeps it in ``state["native"]``); absent or None is a fresh one.
    ``issuers`` maps an item key to the route key it was first seen on."""

    v: int
    route: str
    disabled: List[Literal["openai_compaction", "anthropic_compaction"]]
    issuers: Dict[str, str]
    app_server: NativeAppServerState
    notice_shown: str
    #: keys of what prepare has handed over for archiving (each drop archived once)
    archived: List[str]


class NativeAppServerDecision(TypedDict):
    mode: Literal["native", "hermes", "off"]
    initiator: Literal["app_server", "host", "none"]
    compact_now: bool


class NativeLocal(TypedDict):
    """The local compressor beside the native mechanism: armed (the fallback), and
    whether it may rewrite the transcript (never on the app-server route)."""

    armed: bool
    rewrite: bool
    threshold_tokens: int


#: The Codex gpt-5.5 autoraise notice (kind ``codex_autoraise``): the model, the
#: fraction before and after; ``show`` once per model and threshold.
NativeNotice = TypedDict(
    "NativeNotice", {"kind": str, "model": str, "from": float, "to": float, "show": bool}
)


class NativeDecision(TypedDict):
    """native.policy's answer: what the next request carries and why (every key is
    always present). Apply ``body`` (merged over the request body) and delete the
    keys in ``remove``; send ``betas`` as the ``anthropic-beta`` header; keep
    ``session`` (the next session)."""

    route: str
    mechanism: Literal["openai_compaction", "anthropic_threshold", "anthropic_on_demand", "app_server", "none"]
    reason: str
    body: Dict[str, Any]
    remove: List[str]
    betas: List[str]
    compact_now: bool
    compaction_request: Optional[Dict[str, Any]]
    app_server: Optional[NativeAppServerDecision]
    drop_issuers: List[str]
    local: NativeLocal
    compact_threshold: int
    notice: Optional[NativeNotice]
    session: NativeSession


class NativeSeen(TypedDict):
    kind: Literal["openai_compaction", "anthropic_compaction", "app_server_compaction"]
    key: str
    issuer: str


class NativeObservation(TypedDict):
    """native.observe's answer: the next session, the compaction items seen, the
    mechanism a rejection disabled (None when none), whether to send the request
    again (without the field), and a reason code (``rejected``, ``transient``,
    ``compaction_returned``, ``unrelated``, ...)."""

    session: NativeSession
    seen: List[NativeSeen]
    disabled: Optional[Literal["openai_compaction", "anthropic_compaction"]]
    retry: bool
    reason: str


class NativeDropped(TypedDict):
    """An input index native.trim left out, and why: ``replaced`` (swapped for an
    on-demand compaction block), ``other_issuer`` (a compaction item of another
    route), ``disabled`` (an Anthropic block of a mechanism the session turned
    off), ``before_compaction`` (summarized by the newest compaction item)."""

    index: int
    reason: Literal["replaced", "other_issuer", "disabled", "before_compaction"]


class NativeRewritten(TypedDict):
    """An input index native.trim kept but changed (an Anthropic message that lost
    the blocks before the newest compaction block, or whose foreign block became a
    text block), with ``original``, the caller's message, to archive."""

    index: int
    reason: Literal["other_issuer", "disabled", "before_compaction"]
    original: Message


class NativeTrimReplace(TypedDict):
    """native.trim's ``replace``: messages[0:count] become ``message`` (Anthropic
    on-demand compaction: the message holding the returned block)."""

    count: int
    message: Message


class NativeTrimResult(TypedDict):
    """native.trim's answer: the messages to send (unchanged ones are the caller's
    own objects); every input index is kept or in ``dropped``, whose originals (the
    caller's) are ``dropped_messages``, in the same order; ``rewritten`` lists the
    kept ones that changed."""

    messages: List[Message]
    dropped: List[NativeDropped]
    dropped_messages: List[Message]
    rewritten: List[NativeRewritten]
    changed: bool


class NativeArchived(TypedDict):
    """One message native.prepare hands over for archiving: its index in the list,
    why it left what is sent, and the message as it was."""

    index: int
    reason: str
    message: Message


class NativePreparedTrim(TypedDict):
    """What native.prepare left out of the body's list (``input`` or ``messages``);
    ``archive`` is what of it was not handed over before (archive it once)."""

    list: str
    dropped: List[NativeDropped]
    dropped_messages: List[Message]
    rewritten: List[NativeRewritten]
    archive: List[NativeArchived]


class NativePrepared(TypedDict):
    """Compactor.native_prepare's answer (native.prepare, as the core writes it)."""

    body: Dict[str, Any]
    betas: List[str]
    compaction_body: Optional[Dict[str, Any]]
    decision: NativeDecision
    trimmed: NativePreparedTrim


class NativeRequest(TypedDict):
    """ContextEngine.prepare_request's answer (native.prepare): the body to send
    (a new dict), the ``anthropic-beta`` values, the policy's decision, the trim of
    the body's list (None when it carried no compaction item), and the body of an
    Anthropic on-demand compaction due now (None otherwise)."""

    body: Dict[str, Any]
    betas: List[str]
    decision: NativeDecision
    trim: Optional[NativeTrimResult]
    compaction_body: Optional[Dict[str, Any]]


class NativeErrorOutcome(TypedDict):
    """ContextEngine.observe_error's answer: send the request again (prepare it
    anew: the rejected field is then left out), the mechanism disabled for the
    session, and native.observe's reason."""

    retry: bool
    disabled: Optional[Literal["openai_compaction", "anthropic_compaction"]]
    reason: str


JSONValue = Union[None, bool, int, float, str, List[Any], Dict[str, Any]]
