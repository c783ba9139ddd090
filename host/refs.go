package host

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/ctxcompact/ctxcompact/core"
)

// Engine.Compact asks the core for output "refs" and puts the caller's messages
// back itself: an unchanged message comes back as its input index and an archived
// entry without its message, so the response holds only what the compaction
// wrote, not a second copy of the conversation (1.6M short messages: 129 MB of
// response, decoded into 1.6M fresh json.RawMessage copies, before). The
// messages put back are slices of the caller's input, byte for byte what the core
// would have written: the core's messages and archived originals are the input's
// elements as they are.

// arrayElements returns the offsets [start, end) of the elements of the JSON
// array b, two per element, or nil when b is not an array. b is valid JSON (the
// request checked it, and so did the core).
func arrayElements(b []byte) []uint32 {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil
	}
	var offs []uint32
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return []uint32{}
	}
	for i < len(b) {
		start := i
		i = skipValue(b, i)
		offs = append(offs, uint32(start), uint32(i))
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			break
		}
		i = skipSpace(b, i+1)
	}
	return offs
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the offset just past the JSON value at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		c := b[i]
		switch c {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
			i++
		default:
			i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return i
		}
	}
	return i
}

// putBack replaces the refs in res with the caller's messages from input: the
// indices among res.Messages and the archived entries without a message.
func putBack(res *core.CompactResult, input json.RawMessage) error {
	var offs []uint32
	elem := func(i int) (json.RawMessage, error) {
		if offs == nil {
			if offs = arrayElements(input); offs == nil {
				return nil, fmt.Errorf("%w: the result refers to input messages, and the input is not an array", ErrABIMismatch)
			}
		}
		if i < 0 || 2*i+1 >= len(offs) {
			return nil, fmt.Errorf("%w: the result refers to input message %d; the input has %d", ErrABIMismatch, i, len(offs)/2)
		}
		s, e := offs[2*i], offs[2*i+1]
		return input[s:e:e], nil
	}
	for k, m := range res.Messages {
		if len(m) == 0 || m[0] < '0' || m[0] > '9' {
			continue
		}
		i, err := strconv.Atoi(string(m))
		if err != nil {
			return fmt.Errorf("%w: output message %d is %s, neither a message nor an input index", ErrABIMismatch, k, m)
		}
		if res.Messages[k], err = elem(i); err != nil {
			return err
		}
	}
	for k := range res.Archived {
		if len(res.Archived[k].Message) > 0 {
			continue
		}
		msg, err := elem(res.Archived[k].Index)
		if err != nil {
			return err
		}
		res.Archived[k].Message = msg
	}
	return nil
}
