package core

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// growingConversation returns n messages of varied content, each distinct.
func growingConversation(n int) []string {
	msgs := make([]string, n)
	for i := range msgs {
		switch i % 4 {
		case 0:
			msgs[i] = fmt.Sprintf(`{"role":"user","content":"Step %d: please fix the failing test in pkg/mod%d_test.go — 机器学习模型需要大量的训练数据，测试 %d 🚀 東京都の人口"}`, i, i, i)
		case 1:
			msgs[i] = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"bash","arguments":"{\"command\": \"go test ./pkg/mod%d -run TestX%d\"}"}}]}`, i, i, i)
		case 2:
			msgs[i] = fmt.Sprintf(`{"role":"tool","tool_call_id":"c%d","content":"--- FAIL: TestX%d (0.00s)\n    x_test.go:%d: got %d, want %d\nFAIL\n%s"}`, i-1, i-1, i, i*7, i*7+1, strings.Repeat("ok  \tpkg/other\t0.01s\n", i%9))
		default:
			msgs[i] = fmt.Sprintf(`{"role":"assistant","content":"The off-by-one in mod%d is fixed: the loop now ends at len(xs)-%d."}`, i, i%3)
		}
	}
	return msgs
}

func jsonArray(msgs []string) []byte { return []byte("[" + strings.Join(msgs, ",") + "]") }

// uncachedCounts counts each message directly, bypassing the cache.
func uncachedCounts(e *exactEncoding, msgs []string) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = e.message(gjson.Parse(m))
	}
	return out
}

func TestCountCacheIncrementalHits(t *testing.T) {
	counts.reset()
	msgs := growingConversation(40)
	for n := 1; n <= len(msgs); n++ {
		r, err := CountTokens(jsonArray(msgs[:n]), CountTokensOptions{Encoding: EncodingO200k})
		if err != nil {
			t.Fatal(err)
		}
		if r.CacheHits != n-1 {
			t.Fatalf("conversation of %d messages: %d cache hits, want %d (every message but the new one)", n, r.CacheHits, n-1)
		}
	}
	// Another encoding does not hit the o200k entries.
	r, _ := CountTokens(jsonArray(msgs), CountTokensOptions{Encoding: EncodingCl100k})
	if r.CacheHits != 0 {
		t.Errorf("cl100k hit %d o200k entries", r.CacheHits)
	}
	if counts.size() != 2*len(msgs) {
		t.Errorf("cache holds %d counts, want %d", counts.size(), 2*len(msgs))
	}
}

// The cache never changes a result: cold, warm, after evictions, calibrated, and
// from many goroutines at once, every count equals the uncached count.
func TestCountCacheNeverChangesResults(t *testing.T) {
	msgs := growingConversation(64)
	want := map[*exactEncoding][]int{o200k: uncachedCounts(o200k, msgs), cl100k: uncachedCounts(cl100k, msgs)}
	if reflect.DeepEqual(want[o200k], want[cl100k]) {
		t.Fatal("test needs messages the two encodings count differently")
	}
	check := func(label string) {
		t.Helper()
		for e, w := range want {
			r, err := CountTokens(jsonArray(msgs), CountTokensOptions{Encoding: e.name})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.PerMessage, w) {
				t.Fatalf("%s/%s: cached counts %v differ from uncached %v", label, e.name, r.PerMessage, w)
			}
		}
	}
	counts.reset()
	check("cold")
	check("warm")

	// Evict: push more than two generations of other messages through the cache.
	for i := 0; i < 2*countCacheGeneration+10; i++ {
		counts.put(newCountKey(o200k.id, fmt.Sprintf(`{"filler":%d}`, i)), i)
	}
	if s := counts.size(); s > 2*countCacheGeneration {
		t.Fatalf("cache holds %d entries, bound is %d", s, 2*countCacheGeneration)
	}
	check("after eviction")

	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			e := []*exactEncoding{o200k, cl100k}[g%2]
			for k := 0; k < 5; k++ {
				sub := msgs[g : g+40]
				r, err := CountTokens(jsonArray(sub), CountTokensOptions{Encoding: e.name, Calibration: 1 + float64(g)/10})
				if err != nil {
					errs <- err.Error()
					return
				}
				for i, n := range r.PerMessage {
					if w := int(float64(want[e][g+i])*(1+float64(g)/10) + 0.5); n != w {
						errs <- fmt.Sprintf("goroutine %d message %d: %d, want %d", g, g+i, n, w)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestCountCacheGenerationsKeepRecentEntries(t *testing.T) {
	counts.reset()
	k := func(i int) countKey { return newCountKey(o200k.id, fmt.Sprint(i)) }
	for i := 0; i < countCacheGeneration; i++ {
		counts.put(k(i), i)
	}
	// Entry 0 is read (moves to the current generation) while the rest age out.
	for i := countCacheGeneration; i < 2*countCacheGeneration; i++ {
		if i == countCacheGeneration+1 {
			if n, ok := counts.get(k(0)); !ok || n != 0 {
				t.Fatal("entry 0 lost before the first rotation")
			}
		}
		counts.put(k(i), i)
	}
	if n, ok := counts.get(k(0)); !ok || n != 0 {
		t.Error("a recently read entry was evicted")
	}
	if _, ok := counts.get(k(1)); ok {
		t.Error("an entry two generations old is still cached")
	}
}

func TestHash128(t *testing.T) {
	seen := map[[2]uint64]string{}
	add := func(s string) {
		h1, h2 := hash128(s)
		if prev, ok := seen[[2]uint64{h1, h2}]; ok {
			t.Fatalf("hash128 collision: %q and %q", prev, s)
		}
		seen[[2]uint64{h1, h2}] = s
	}
	base := strings.Repeat(`{"role":"user","content":"abcdefghijklmnop"}`, 3)
	add("")
	for i := 0; i < len(base); i++ {
		add(base[:i+1]) // every length
		b := []byte(base)
		b[i] ^= 1 // every one-bit change
		add(string(b))
	}
	for i := 0; i < 20000; i++ {
		add(fmt.Sprint(i))
	}
	if a1, a2 := hash128(base); a1 == a2 {
		t.Error("the two halves should differ")
	}
}
