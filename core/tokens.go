package core

// Encodings lists the token encodings the core can count with. "rough" is the
// chars/4 estimate of DESIGN §7.
func Encodings() []string { return []string{"rough"} }
