// Package jsonraw reads JSON text in place: a validating scan that records an
// object's members as it goes, walkers that hand out raw values without decoding
// them, string decoding and encoding, and walkers over JSON held, escaped, inside a
// JSON string (tool-call arguments). It knows no request or message layout: what a
// scan records or counts is given to it as data.
//
// Text is a string, and values are substrings of it (the same memory), so a caller
// can tell where a value lies (OffsetOf, LocatePart). Functions never panic on text
// that is not valid JSON; they stop early and say so (-1, false, or ""). The hot
// loops look at eight bytes at a time (Word); this is the one package of the core
// that uses unsafe, for those loads and for viewing bytes as a string.
package jsonraw
