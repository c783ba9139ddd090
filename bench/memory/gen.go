package main

// words are the vocabulary of the generated messages.
var words = []string{"the", "build", "fails", "on", "main", "after", "test", "passes", "fix", "config",
	"read", "file", "error", "line", "run", "again", "ok", "done", "check", "path"}

// generate writes n short chat messages as a JSON array, the same bytes on every
// run: user and assistant turns of one word each (36 bytes a message on average), after
// one system message. The words come from a fixed linear congruential sequence.
func generate(n int) []byte {
	b := make([]byte, 0, n*40)
	b = append(b, `[{"role":"system","content":"You are a coding agent."}`...)
	x := uint32(1)
	next := func() uint32 { x = x*1664525 + 1013904223; return x >> 8 }
	for i := 1; i < n; i++ {
		role := "user"
		if i%2 == 0 {
			role = "assistant"
		}
		b = append(b, `,{"role":"`...)
		b = append(b, role...)
		b = append(b, `","content":"`...)
		b = append(b, words[next()%uint32(len(words))]...)
		b = append(b, `"}`...)
	}
	return append(b, ']')
}
