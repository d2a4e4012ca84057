package main

import (
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// threadFlags are the flags that set a number of threads or jobs.
var threadFlags = []string{"threads", "ref-threads", "jobs"}

// maxThreads bounds thread and job counts: more than four per CPU only
// costs memory (every worker has its scratch), and a typo like -t 100000
// should not start that many.
func maxThreads() int { return max(64, 4*runtime.NumCPU()) }

// checkThreads refuses a negative or absurd thread or job count given on
// the command line, before any work starts.
func checkThreads(fs *pflag.FlagSet) error {
	limit := maxThreads()
	for _, name := range threadFlags {
		f := fs.Lookup(name)
		if f == nil || !f.Changed {
			continue
		}
		for _, s := range strings.Split(strings.Trim(f.Value.String(), "[]"), ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				continue // pflag already parsed it; not a number we can judge
			}
			switch {
			case n < 0:
				return usageError("--%s %d: want 0 or more", name, n)
			case n > limit:
				return usageError("--%s %d is too large (at most %d here: the larger of 64 and 4 × %d CPUs)", name, n, limit, runtime.NumCPU())
			}
		}
	}
	return nil
}

// checkContext refuses a negative --ctx (0 means the model's context
// length); the runtime would take it as 0 without a word.
func checkContext(fs *pflag.FlagSet) error {
	f := fs.Lookup("ctx")
	if f == nil || !f.Changed {
		return nil
	}
	if n, err := strconv.Atoi(f.Value.String()); err == nil && n < 0 {
		return usageError("--ctx %d: want 0 (the model's context length) or more", n)
	}
	return nil
}
