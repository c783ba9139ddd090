package jsonraw

import (
	"strconv"
	"testing"
)

// FuzzAppendGoQuote holds AppendGoQuote to strconv.Quote, its reference.
func FuzzAppendGoQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "tab\tand \"quote\" \\", "\x00\x7f\xff", "é\u2028\U0001F600", "\u00ad\ufeff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendGoQuote([]byte("x"), s)), "x"+strconv.Quote(s); got != want {
			t.Fatalf("AppendGoQuote(%q) = %s, strconv.Quote gives %s", s, got, want)
		}
	})
}
