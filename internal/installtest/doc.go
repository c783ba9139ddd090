// Package installtest holds tests of the Go install routes the README names, run
// from outside the module: `go install ./cmd/ctxcompact` from a checkout, and another
// module using this one through a replace directive to a checkout path. It has no
// code of its own.
package installtest
