package core

import "strings"

// unknownName is the error for a name that is not one of valid (a request field, an
// event's field): it says what was given, the valid name it most likely meant, and
// all of them, so a misspelling is fixed from the message alone.
func unknownName(code ErrorCode, path, what, name string, valid []string) *Error {
	list := "none"
	if len(valid) > 0 {
		list = strings.Join(valid, ", ")
	}
	if near := closestName(name, valid); near != "" {
		return errorf(code, path, "%s %q; did you mean %q? (it takes: %s)", what, name, near, list)
	}
	return errorf(code, path, "%s %q (it takes: %s)", what, name, list)
}

// closestName returns the name of valid that name most likely misspells, or "" when
// none is close: first one equal to it but for case, "_" and "-" (promptTokens,
// prompt-tokens), then the nearest by edit distance, within a third of its length.
func closestName(name string, valid []string) string {
	squash := func(s string) string { return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s)) }
	n := squash(name)
	for _, v := range valid {
		if squash(v) == n {
			return v
		}
	}
	best, bestD := "", len(n)/3+1
	for _, v := range valid {
		if d := editDistance(n, squash(v)); d < bestD {
			best, bestD = v, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes (names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
