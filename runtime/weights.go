package runtime

import "github.com/qnnprep/qnnprep/internal/mmapfile"

// mapWeights readies the weight matrices where the model holds them (for
// a GGUF file, its memory map), so that each weight is held once: in the
// file's page cache, shared with every process that maps the file. Their
// pages are mapped at once, as llama.cpp does at load, in 2 MiB pages
// where the system allows (mmapfile.PopulateHuge): decoding streams every
// weight once per token, and with 4 KiB pages the address translations
// (two-level on a virtual machine) stall the stream, and the first touch
// of each page costs as much again.
func (e *Engine) mapWeights() {
	var spans [][]byte
	seen := map[*matrix]bool{}
	add := func(ms ...*matrix) {
		for _, m := range ms {
			if m != nil && !seen[m] && len(m.data) > 0 {
				seen[m] = true
				spans = append(spans, m.data)
			}
		}
	}
	add(e.embd, e.out)
	for i := range e.layers {
		l := &e.layers[i]
		add(l.wq, l.wk, l.wv, l.wo, l.wqkv, l.wz, l.wqkvz, l.wba, l.wbeta, l.walpha, l.wssmOut, l.wgate, l.wup, l.wdown)
	}
	mmapfile.PopulateHuge(spans)
}
