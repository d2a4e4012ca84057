// Package shellword quotes words for a POSIX shell, the way the SDK
// command scripts and the CI workflows print them.
package shellword

import "strings"

// Quote returns s as one shell word: unchanged when it holds only
// characters a shell leaves alone, else in single quotes (an empty s
// becomes a pair of them).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./,:=@+%", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
