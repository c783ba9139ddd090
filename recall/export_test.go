package recall

// SetArchiveHook sets the function Archive runs in its transaction before the
// commit (for the tests of package recall_test that kill a writer there).
func SetArchiveHook(f func()) { archiveHook = f }
