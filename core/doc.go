// Package core is ctxcompact's engine: it decides when a long agent conversation
// should be compacted, prunes old tool output, keeps the head and a token-budgeted
// tail, has the middle summarized (by the host's LLM, or extractively), repairs
// tool-call/result pairs and places prompt-cache breakpoints. It is pure Go with no
// I/O: the same code runs natively and as the WebAssembly module the JS, Python and
// Go hosts load (docs/DESIGN.md has the algorithms, docs/OPS.md every op).
//
// There are two doors. Call (and Dispatch) takes a JSON request envelope and returns
// a JSON response envelope: it is the ABI every runtime shares, and its bytes are the
// contract (testdata/ holds the vectors). Compact, Prune, Sanitize and Validate are
// the typed door for Go programs: option structs in, result structs out, errors as
// *Error with a stable Code and a JSON-pointer Path. Both run the same ops.
//
// Messages are JSON in one of the Formats (OpenAI chat, Anthropic Messages, the
// Vercel AI SDK's ModelMessage, ...), detected when not given. Messages a call does
// not change come back in the caller's bytes; every input message is accounted for
// in the result's Archived.
//
// Layout: the phases (boundary.go, prune.go, sanitize.go, assemble.go, summary.go,
// fallback.go, validate.go) work on one view of a message and ask a messageFormat
// (format.go, format_*.go) for everything that depends on the shape. The raw JSON
// machinery lives in internal/jsonraw, the exact tokenizer in internal/bpe.
package core
