package host

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"unsafe"

	"github.com/ctxcompact/ctxcompact/core"
)

// TestMemoryFlat runs 1,000 forced compactions of a trace on one instance and checks
// that its linear memory stays flat after a warm-up: the guest frees each response
// and yields, so the Go GC in the module reclaims the garbage. Flat allows one step
// of the GC's heap goal (at most 1 MiB); without the yield the same run grows by
// tens of MiB per hundred calls.
func TestMemoryFlat(t *testing.T) {
	requireOps(t, "compact.begin")
	if testing.Short() {
		t.Skip("1,000 compactions; skipped in -short mode")
	}
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1))
	env := compactBegin(traceNamed(t, smallTrace), 32000)
	inst := e.idle[0]
	start := inst.memoryBytes()
	const warmup, calls = 200, 1000
	var warm uint32
	for i := range warmup + calls {
		if i == warmup {
			warm = inst.memoryBytes()
		}
		if _, err := e.Call(ctx, env); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(e.idle) != 1 || e.idle[0] != inst {
			t.Fatalf("call %d moved to another instance", i)
		}
	}
	end := inst.memoryBytes()
	t.Logf("instance memory: %d KiB at start, %d KiB after %d warm-up compactions, %d KiB after %d more",
		start>>10, warm>>10, warmup, end>>10, calls)
	const slack = 1 << 20
	if end > warm+slack {
		t.Errorf("memory grew from %d to %d KiB over %d compactions after warm-up (allowed: %d KiB)",
			warm>>10, end>>10, calls, slack>>10)
	}
}

// bigInfo is an info request padded with n bytes of whitespace (info takes no
// field to pad): the guest reads it in place, so its linear memory grows past n.
func bigInfo(n int) []byte {
	b := append(make([]byte, 0, n+64), `{"op":"info"`...)
	b = append(b, bytes.Repeat([]byte{' '}, n)...)
	return append(b, '}')
}

// TestGrownInstanceIsReplaced: an instance whose linear memory a call grew past
// the bound (DefaultMaxInstanceMemory unless WithMaxInstanceMemory) is closed after
// that call, whose result is intact; the next call runs on a fresh instance and
// answers as before. Without a bound (0) the grown instance stays in the pool.
func TestGrownInstanceIsReplaced(t *testing.T) {
	requireOps(t, "compact.begin")
	ctx := context.Background()
	msgs := traceNamed(t, smallTrace)
	cfg := json.RawMessage(`{"model":{"context_length":8000}}`)
	e := newEngine(t, WithPoolSize(1))
	before, err := e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	first := e.idle[0]
	resp, err := e.Call(ctx, bigInfo(70<<20))
	if err != nil || !bytes.Contains(resp, []byte(`"name":"ctxcompact"`)) {
		t.Fatalf("the call that grew the instance: %v %s", err, clip(resp))
	}
	if len(e.idle) != 0 {
		t.Fatalf("the pool kept %d instances after a call that grew one past %d MiB (memory %d MiB)",
			len(e.idle), DefaultMaxInstanceMemory>>20, first.memoryBytes()>>20)
	}
	after, err := e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.idle) != 1 || e.idle[0] == first || e.idle[0].memoryBytes() > DefaultMaxInstanceMemory {
		t.Fatalf("after the next call: %d idle instances, want 1 fresh one under the bound", len(e.idle))
	}
	a, _ := json.Marshal(before)
	b, _ := json.Marshal(after)
	if !bytes.Equal(a, b) {
		t.Fatalf("the fresh instance compacts differently:\n%s\n%s", clip(a), clip(b))
	}

	unbounded := newEngine(t, WithPoolSize(1), WithMaxInstanceMemory(0))
	inst := unbounded.idle[0]
	if _, err := unbounded.Call(ctx, bigInfo(70<<20)); err != nil {
		t.Fatal(err)
	}
	if len(unbounded.idle) != 1 || unbounded.idle[0] != inst || inst.memoryBytes() < 70<<20 {
		t.Fatalf("without a bound the grown instance should stay: %d idle", len(unbounded.idle))
	}
}

// TestMemoryGrowsInPlace: growing an instance's linear memory does not move it
// (it is a mapping of its own, not a Go slice copied at every growth), where
// the host maps memory itself.
func TestMemoryGrowsInPlace(t *testing.T) {
	if !mapsMemory() {
		t.Skip("this host leaves linear memory to wazero")
	}
	ctx := context.Background()
	e := newEngine(t, WithPoolSize(1), WithMaxInstanceMemory(0))
	inst := e.idle[0]
	base, _ := inst.mem.Read(0, 1)
	size := inst.memoryBytes()
	if _, err := e.Call(ctx, bigInfo(32<<20)); err != nil {
		t.Fatal(err)
	}
	now, _ := inst.mem.Read(0, 1)
	if inst.memoryBytes() < size+32<<20 {
		t.Fatalf("memory %d -> %d bytes: the call did not grow it", size, inst.memoryBytes())
	}
	if &base[0] != &now[0] {
		t.Fatalf("linear memory moved when it grew from %d to %d MiB", size>>20, inst.memoryBytes()>>20)
	}
}

// TestCompactResultSharesTheInput: Engine.Compact returns the unchanged and the
// archived messages as slices of the caller's input, not copies (the module
// answers with refs), byte for byte what output "messages" gives, also for an
// input with whitespace between and inside its messages.
func TestCompactResultSharesTheInput(t *testing.T) {
	requireOps(t, "compact.begin")
	ctx := context.Background()
	e := sharedEngine(t)
	cfg := json.RawMessage(`{"model":{"context_length":8000}}`)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, traceNamed(t, smallTrace), " ", "\t"); err != nil {
		t.Fatal(err)
	}
	for name, msgs := range map[string]json.RawMessage{"compact": traceNamed(t, smallTrace), "indented": pretty.Bytes()} {
		res, err := e.Compact(ctx, msgs, cfg, nil, CompactOptions{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		want, err := e.CompactBegin(ctx, CompactRequest{Messages: msgs, Config: cfg, Force: true,
			Summarizer: core.SummarizerBuiltin, Output: "messages"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Archived) == 0 || len(res.Messages) != len(want.Messages) || len(res.Archived) != len(want.Archived) {
			t.Fatalf("%s: %d messages, %d archived; output messages gives %d and %d", name,
				len(res.Messages), len(res.Archived), len(want.Messages), len(want.Archived))
		}
		inInput := func(m json.RawMessage) bool {
			return len(m) > 0 && uintptr(unsafe.Pointer(&m[0])) >= uintptr(unsafe.Pointer(&msgs[0])) &&
				uintptr(unsafe.Pointer(&m[0])) < uintptr(unsafe.Pointer(&msgs[0]))+uintptr(len(msgs))
		}
		shared := 0
		for i, m := range res.Messages {
			if !bytes.Equal(m, want.Messages[i]) {
				t.Fatalf("%s: message %d differs:\n%s\n%s", name, i, clip(m), clip(want.Messages[i]))
			}
			if inInput(m) {
				shared++
			}
		}
		for i, a := range res.Archived {
			w := want.Archived[i]
			if a.Index != w.Index || a.Reason != w.Reason || !bytes.Equal(a.Message, w.Message) {
				t.Fatalf("%s: archived %d differs: %d %s %s / %d %s %s", name, i, a.Index, a.Reason, clip(a.Message), w.Index, w.Reason, clip(w.Message))
			}
			if !inInput(a.Message) {
				t.Fatalf("%s: archived %d is a copy, not the caller's message", name, i)
			}
		}
		if shared == 0 {
			t.Fatalf("%s: no unchanged message is the caller's", name)
		}
		if r, _ := json.Marshal(res.Report); !bytes.Equal(r, mustJSON(t, want.Report)) {
			t.Fatalf("%s: reports differ", name)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestArrayElements: the element offsets of arrays with strings holding brackets,
// quotes and escapes, nested values, scalars and whitespace.
func TestArrayElements(t *testing.T) {
	in := []byte(" [ {\"a\":\"]}\\\"[\"} ,\n[1,[2]],\t\"x\\\\\" , 12.5e3,true,null,{} ] ")
	want := []string{`{"a":"]}\"["}`, `[1,[2]]`, `"x\\"`, `12.5e3`, `true`, `null`, `{}`}
	offs := arrayElements(in)
	var got []string
	for i := 0; i+1 < len(offs); i += 2 {
		got = append(got, string(in[offs[i]:offs[i+1]]))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if offs := arrayElements([]byte(" [ ] ")); offs == nil || len(offs) != 0 {
		t.Fatalf("empty array: %v", offs)
	}
	if arrayElements([]byte(`{"a":1}`)) != nil {
		t.Fatal("an object is not an array")
	}
}

// TestMemoryFreedInUse: a linear memory freed while the host uses it (wazero
// closes a module whose context is done while it runs) is released at leave, not
// under the running call; once freed, enter refuses it.
func TestMemoryFreedInUse(t *testing.T) {
	released := 0
	g := &memoryGuard{release: func() { released++ }}
	if !g.enter() {
		t.Fatal("enter on a live memory")
	}
	g.free()
	if released != 0 {
		t.Fatal("released while in use")
	}
	g.leave()
	if released != 1 {
		t.Fatalf("released %d times at leave, want 1", released)
	}
	if g.enter() {
		t.Fatal("enter on a freed memory")
	}
	g.leave()
	g.free()
	if released != 1 {
		t.Fatalf("released %d times in all, want 1", released)
	}
}
