// Package host runs the ctxcompact WebAssembly module (wasm.Binary) on wazero, so a
// Go program gets byte for byte the behaviour the JS and Python bindings get.
//
// Make one Engine per process with New: compiling the module is slow (2–3 s on
// wazero's compiler; about 110 ms with WithCompilationCache once the cache is warm;
// see wasm/README.md). An Engine is safe for concurrent use; it keeps a pool of
// module instances, makes them on demand up to WithPoolSize, and replaces an
// instance that traps.
//
//	eng, err := host.New(ctx, host.WithCompilationCache(cacheDir))
//	if err != nil {
//		return err
//	}
//	defer eng.Close(ctx)
//	info, err := eng.Info(ctx)
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
