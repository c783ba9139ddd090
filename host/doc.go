// Package host runs the ctxcompact WebAssembly module (wasm.Binary) on wazero, so a
// Go program gets byte for byte the behaviour the JS and Python bindings get.
//
// Make one Engine per process with New: compiling the module is slow (2–3 s on
// wazero's compiler; about 110 ms with WithCompilationCache once the cache is warm;
// see wasm/README.md). An Engine is safe for concurrent use; it keeps a pool of
// module instances, makes them on demand up to WithPoolSize, and replaces an
// instance that traps or that a call left with more linear memory than
// WithMaxInstanceMemory (64 MiB by default; docs/MEMORY.md).
//
//	eng, err := host.New(ctx, host.WithCompilationCache(cacheDir))
//	if err != nil {
//		return err
//	}
//	defer eng.Close(ctx)
//	info, err := eng.Info(ctx)
//
// Compaction: Engine.Compact, or a Compactor (NewCompactor checks its config once;
// each call's CompactOptions.Config merges over it through the core's
// config.merge, the rule of every runtime). A summarizer (Summarize) runs on its
// own goroutine under CompactOptions.Timeout (DefaultSummarizeTimeout, 2 minutes,
// when 0): one that does not answer in time is abandoned, even if it ignores its
// context, and the compaction falls back to the extractive summary with the
// report's fallback_code "timeout". When Compact's own context is done first,
// Compact returns its error and sends no compact.finish. CompactOptions.Format
// names the messages' shape (FormatOpenAI, FormatAnthropic; "" detects it), and
// CompactOptions.System carries Anthropic's top-level system prompt, which the
// result's System returns with the compaction note.
//
// The other ops have typed methods (TokensCount, Prune, CacheApply, CacheSimulate,
// ...): what an op takes beyond its messages is an options struct whose zero value
// is the op's default, and results are structs, not raw JSON. Invoke runs any op
// by name.
//
// OpenAISummarizer (chat completions or the Responses API) and AnthropicSummarizer
// are ready summarizers over plain HTTP: the template in the system slot, the size
// in each API's own parameter, the summarizer's context on the request, and every
// failure (an HTTP error status, 429 and 5xx included, never retried) an error
// the compaction falls back from.
//
// ContextEngine keeps an agent session between compactions (usage, the trigger
// and its breaker, model switches), the method set of the JS and Python
// ContextEngine, over the core's engine.* ops; its state is a JSON object a host
// can persist. With {"context": {"engine": "lossless"}}, a ContextEngineOptions.Store
// (package github.com/ctxcompact/ctxcompact/recall, a SQLite file; this package
// links no SQLite) and a SessionID, it is the lossless engine: every compaction's
// originals are archived, the summary names them, and ToolSchemas and
// HandleToolCall give the agent context_search and context_expand.
//
// Provider-native compaction (OpenAI's server-side compaction, Anthropic's
// compaction edit and on-demand compaction, the Codex app server's own threads):
// NativePolicy, NativePrepare, NativeObserve and NativeTrim run the core's
// native.* ops over a session the host keeps; a ContextEngine keeps that session
// in its state and gives PrepareRequest (native.prepare: the decision applied to
// a request body, with the betas to send), ObserveResponse, ObserveError (a rejection disables the field and says
// to retry) and ObserveEvent (app-server notifications and the host's own
// thread/compact/start).
//
// Errors: a request the core rejects returns its *core.Error (match the code with
// errors.Is(err, &core.Error{Code: core.CodeInvalidMessages})); host-level failures
// wrap ErrBadBinary, ErrABIMismatch, ErrClosed or ErrTrapped. A call whose instance
// trapped fails with code internal, as in every runtime: the instance is replaced
// and nothing is retried.
//
// Go programs that do not need the wasm boundary can call package core directly;
// this package exists to run and test the artifact every runtime shares.
package host
