package host

import (
	"io"
	"runtime"
)

// Option configures an Engine. See New.
type Option func(*config)

type config struct {
	binary      []byte
	cacheDir    string
	poolSize    int
	memoryPages uint32
	stderr      io.Writer
	interpreter bool
	closeOnCtx  bool
	// maxInstanceMemory bounds an idle instance's linear memory in bytes (0: no bound).
	maxInstanceMemory uint64
}

func defaultConfig() config {
	return config{
		poolSize:          runtime.GOMAXPROCS(0),
		closeOnCtx:        false,
		maxInstanceMemory: DefaultMaxInstanceMemory,
	}
}

// DefaultMaxInstanceMemory is the default of WithMaxInstanceMemory: 64 MiB, the
// default of the JS and Python bindings too. An instance starts at about 7 MiB and
// stays under 20 MiB compacting conversations of a few MB; it passes 64 MiB on a
// request of several MB of real messages or tens of thousands of short ones.
const DefaultMaxInstanceMemory = 64 << 20

// WithMaxInstanceMemory bounds the linear memory an instance keeps between calls:
// after a call that left an instance's memory above bytes, the instance is closed
// (its memory unmapped, back to the system at once) instead of returned to the
// pool, and a later call makes a fresh one (a few ms; see BenchmarkInstantiate).
// Linear memory never shrinks: without a bound, every instance of the pool keeps
// the peak of the largest call it ran (1.5 GB after 1.6M short messages). The call
// that grew it is not affected; its result is returned as usual. The default is
// DefaultMaxInstanceMemory; 0 means no bound.
func WithMaxInstanceMemory(bytes uint64) Option {
	return func(c *config) { c.maxInstanceMemory = bytes }
}

// WithCompilationCache keeps compiled machine code in dir (created if missing), so
// the next process that calls New with the same dir skips compilation. The cache is
// keyed by the module bytes and the wazero version; it is safe to share dir between
// processes. An empty dir means no on-disk cache (the default).
func WithCompilationCache(dir string) Option {
	return func(c *config) { c.cacheDir = dir }
}

// WithPoolSize bounds the number of module instances, which is the number of calls
// that run at the same time; further calls wait for a free instance. Instances are
// made on demand. The default is runtime.GOMAXPROCS(0). n < 1 means 1.
func WithPoolSize(n int) Option {
	return func(c *config) {
		if n < 1 {
			n = 1
		}
		c.poolSize = n
	}
}

// WithMemoryLimitPages caps the linear memory of each instance at pages of 64 KiB.
// A call that needs more traps; the instance is discarded and the call returns an
// error wrapping ErrTrapped. 0 means the wasm maximum of 4 GiB (the default).
// The module needs its declared minimum plus what the Go runtime allocates in
// _initialize (7 MiB in all for the build measured in wasm/README.md); New fails
// with a clear error below that.
func WithMemoryLimitPages(pages uint32) Option {
	return func(c *config) { c.memoryPages = pages }
}

// WithMemoryLimitMB is WithMemoryLimitPages in MiB (16 pages each).
func WithMemoryLimitMB(mb uint32) Option {
	return WithMemoryLimitPages(mb * 16)
}

// WithStderr sends the guest's stderr (Go runtime fatal errors, panics that escape
// the guest's recover) to w. By default it is discarded. For debugging.
func WithStderr(w io.Writer) Option {
	return func(c *config) { c.stderr = w }
}

// WithInterpreter runs the module on wazero's interpreter instead of its compiler.
// The compiler is used by default where wazero supports it (amd64 and arm64 on the
// common operating systems); the interpreter compiles fast but runs several times
// slower.
func WithInterpreter() Option {
	return func(c *config) { c.interpreter = true }
}

// WithCloseOnContextDone makes a running call stop when its context is canceled or
// its deadline passes: the instance is discarded and the error wraps ErrTrapped and
// the context's error. It is off by default because wazero then inserts periodic
// checks into the compiled code, which made compactions about 5x slower here. A
// context is always honoured while a call waits for a free instance, and Compact
// checks it between compact.begin and compact.finish.
func WithCloseOnContextDone(enabled bool) Option {
	return func(c *config) { c.closeOnCtx = enabled }
}

// WithBinary runs bin instead of the embedded wasm.Binary. It is for testing other
// builds of the module; bin is checked against wasm/abi.json like the default.
func WithBinary(bin []byte) Option {
	return func(c *config) { c.binary = bin }
}
