package bench

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// writeSpecTable writes the speculative rows of reports as a Markdown
// table: one row per path and K, with its acceptance, target calls per
// token, the device estimate and the verdict.
func writeSpecTable(b *strings.Builder, reports []*Report) {
	spec := false
	for _, r := range reports {
		spec = spec || len(r.Speculative) > 0
	}
	if !spec {
		return
	}
	b.WriteString("\n| model | dialog | draft | threads | prompt | K | greedy t/s | speculative t/s | speed-up | window ms | accepted/window | target calls/token | device t/s | sane | load |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
	for _, r := range reports {
		for _, x := range r.Speculative {
			fmt.Fprintf(b, "| %s | %s | %s | %d | %d | %d | %.2f | %.2f | %.2f ± %.2f | %.1f | %.2f | %.3f | %s | %s | %.1f |\n",
				modelLabel(r.Model), dialogLabel(x), specDraftLabel(r, x), x.Threads, x.Depth, x.K, x.GreedyTokensPerSec, x.SpecTokensPerSec,
				x.Speedup, x.SpeedupStddev, 1000*x.WindowSeconds, x.AcceptanceLength, x.TargetCallsPerToken, deviceLabel(x.Device), specSaneLabel(x), x.Load)
		}
	}
}

// dialogLabel is "whole" for the whole-model engine, else the dialog and
// the plan's file name.
func dialogLabel(x SpecResult) string {
	if x.Dialog == "" {
		return "whole"
	}
	return fmt.Sprintf("%s (%s)", x.Dialog, filepath.Base(x.Plan))
}

// specDraftLabel describes the draft model of draft-model rows, and by
// file name what drafts the others (an EAGLE-3 head, ssd-q1's forecast
// embeddings).
func specDraftLabel(r *Report, x SpecResult) string {
	if kind, path, ok := strings.Cut(x.Drafter, " "); ok && (kind == "eagle3" || kind == "forecast") {
		return kind + " " + filepath.Base(path)
	}
	return draftLabel(r.Draft)
}

// deviceLabel is the estimated device tokens/s and plain decoding's.
func deviceLabel(d *DeviceEstimate) string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f (greedy %.2f)", d.TokensPerSec, d.GreedyTokensPerSec)
}

func specSaneLabel(x SpecResult) string {
	switch {
	case x.Sane:
		return "yes"
	case x.SanityNote != "":
		return "NO: " + x.SanityNote
	}
	return "NO: differs from greedy" // reports written before the note
}

// specTest is a speculative row's CSV test: "spec-k4" for the whole-model
// engine, the dialog for a plan's ("ssd-q1-k4").
func specTest(x SpecResult) string {
	if x.Dialog == "" {
		return fmt.Sprintf("spec-k%d", x.K)
	}
	return fmt.Sprintf("%s-k%d", x.Dialog, x.K)
}

// deviceCSV is the device estimate's tokens/s ("" without one).
func deviceCSV(d *DeviceEstimate) string {
	if d == nil {
		return ""
	}
	return strconv.FormatFloat(d.TokensPerSec, 'g', 6, 64)
}
