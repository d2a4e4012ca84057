package main

import (
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a byte-count progress bar shown only when stderr is a
// terminal and the output is not for machines.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(what string, quiet bool) *progress {
	if quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetDescription(what),
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) set(done, total int64) {
	if p.bar == nil {
		return
	}
	if p.bar.GetMax64() != total {
		p.bar.ChangeMax64(total)
	}
	p.bar.Set64(done)
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
