package core

import (
	"github.com/ctxcompact/ctxcompact/core/internal/jsonraw"
	"github.com/tidwall/gjson"
)

// Glue between the raw JSON layer (internal/jsonraw) and the core: which strings
// the validating pass counts, and how its counts become the rough estimate.

// requestScan is what checkJSON has the validating pass count in a request: each
// message's "content" and, deeper in it, the values of "arguments" (OpenAI tool
// calls' function.arguments). They are most of a request's bytes, and counting
// them as they are validated is what keeps the pass single. Characters are classed
// as the rough estimate classes them (cjkDense).
var requestScan = jsonraw.ScanOptions{
	ElementKeys: []string{"content"},
	DeepKeys:    []string{"arguments"},
	Dense:       cjkDense,
}

// checkJSON validates data as one JSON text and measures how deeply it nests (see
// jsonraw.Scan); when members is not nil and data is an object, its members are
// recorded with the strings requestScan names counted.
func checkJSON(data []byte, members *[]jsonraw.Member) (valid bool, depth int) {
	return jsonraw.Scan(data, &requestScan, members)
}

// roughCounted returns the rough tokens and characters of a string the validating
// pass counted, each plus one (as messages cache them: zero means not counted).
func roughCounted(n jsonraw.Count) (tokens1, chars1 int) {
	dense, other := int(n.Dense), int(n.Other)
	return dense + (other+roughCharsPerToken-1)/roughCharsPerToken + 1, dense + other + 1
}

// rawValue wraps a raw JSON value as a gjson.Result without decoding strings: Raw
// and Type are set, Str is not. Use it only where Raw is what is read.
func rawValue(raw string) gjson.Result {
	if raw == "" {
		return gjson.Result{}
	}
	switch raw[0] {
	case '"':
		return gjson.Result{Type: gjson.String, Raw: raw}
	case 'n':
		return gjson.Result{Type: gjson.Null, Raw: raw}
	case 't':
		return gjson.Result{Type: gjson.True, Raw: raw}
	case 'f':
		return gjson.Result{Type: gjson.False, Raw: raw}
	case '{', '[':
		return gjson.Result{Type: gjson.JSON, Raw: raw}
	}
	return gjson.Parse(raw)
}

// fieldOf returns the field key of the JSON object obj as obj.Get(key) returns it
// for a plain key (a string decoded; Index its offset in obj.Raw), but of duplicate
// keys the last, as JSON.parse and json.loads read them: one rule for every reader
// of objects. It does not exist when obj is not an object or has no such field.
func fieldOf(obj gjson.Result, key string) gjson.Result {
	return fieldIn(obj.Raw, key)
}

// fieldIn is fieldOf of the raw JSON object obj.
func fieldIn(obj, key string) gjson.Result {
	v := jsonraw.FindField(obj, key)
	if v == "" {
		return gjson.Result{}
	}
	r := gjson.Parse(v)
	r.Index = jsonraw.OffsetOf(obj, v)
	return r
}

// fieldReader reads an object's fields by key, the last of duplicates: a request's
// params, or objectFields of a nested object.
type fieldReader interface{ Get(key string) gjson.Result }

// objectFields reads the fields of a JSON object with fieldOf.
type objectFields gjson.Result

// Get returns fieldOf(o, key).
func (o objectFields) Get(key string) gjson.Result { return fieldOf(gjson.Result(o), key) }

// firstElement is the first element of the array arr (none when it is empty).
func firstElement(arr gjson.Result) gjson.Result {
	var first gjson.Result
	arr.ForEach(func(_, v gjson.Result) bool {
		first = v
		return false
	})
	return first
}
