// Package bytesize formats byte counts the way plan tables, checks and
// summaries print them, so every report shows one size the same way.
package bytesize

import "fmt"

// Format gives n in binary units: "2.33 GiB", "1.5 MiB", "3.0 KiB", "512 B".
func Format(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
