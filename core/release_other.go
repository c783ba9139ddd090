//go:build !wasm

package core

// releaseBeforeRows does nothing natively: the process's collector runs at its
// own pace there and gives memory back to the system (release_wasm.go).
func releaseBeforeRows(int) (restore func()) { return func() {} }
