//go:build !purego

package panel

// impls returns the assembly this CPU runs beside the Go twins.
func impls() []impl {
	if !hasAsm {
		return nil
	}
	return []impl{{"avx2", q8_0, f16, bf16}}
}
