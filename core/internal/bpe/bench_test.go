package bpe

import "testing"

// BenchmarkCount counts every string of every shared trace's messages, and each
// message's raw JSON (the texts the conformance tests compare), with each encoding;
// MB/s is over those texts. The rank map is built before the timer starts.
//
//	go test ./core/internal/bpe -run '^$' -bench Count
func BenchmarkCount(b *testing.B) {
	files, _, bytes := sharedTraceTexts(b, "BenchmarkCount")
	for _, name := range []string{O200kBase, Cl100kBase} {
		e, _ := Lookup(name)
		b.Run(name, func(b *testing.B) {
			e.Count("warm up")
			b.SetBytes(int64(bytes))
			for b.Loop() {
				for _, f := range files {
					for _, s := range f.texts {
						e.Count(s)
					}
				}
			}
		})
	}
}
