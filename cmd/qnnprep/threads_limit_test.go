package main

import (
	"strings"
	"testing"
)

// Thread and job counts are bounded before any work: a typo like
// -t 100000 is refused with the limit; so is a negative --ctx.
func TestThreadCountsBounded(t *testing.T) {
	model := fixture(t, "stories260K/stories260K-llamacpp.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", model, "--ids", "1", "-n", "1", "-t", "100000"}, "--threads 100000 is too large (at most"},
		{[]string{"run", model, "--ids", "1", "-n", "1", "-t", "-3"}, "--threads -3: want 0 or more"},
		{[]string{"quantize", model, "x.gguf", "--recipe", "q8_0", "-t", "100000"}, "--threads 100000 is too large"},
		{[]string{"bench", model, "-t", "2,5000"}, "--threads 5000 is too large"},
		{[]string{"bench", model, "--ref-threads", "9999"}, "--ref-threads 9999 is too large"},
		{[]string{"run", model, "--ids", "1", "-n", "1", "--ctx", "-5"}, "--ctx -5: want 0 (the model's context length) or more"},
		{[]string{"verify", model, "--golden", "g.json", "--ctx", "-1"}, "--ctx -1: want 0"},
	} {
		t.Run(strings.Join(c.args[:1], " ")+" "+c.args[len(c.args)-1], func(t *testing.T) {
			var code int
			msg := captureStderr(t, func() { code = run(c.args) })
			if code != 2 || !strings.Contains(msg, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, msg, c.want)
			}
		})
	}
}
