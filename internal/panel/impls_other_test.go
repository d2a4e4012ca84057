//go:build purego || !amd64

package panel

// impls returns no assembly: the build runs the Go twins.
func impls() []impl { return nil }
