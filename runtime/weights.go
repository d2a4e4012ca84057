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
	spans := e.DecodeWeights()
	if e.embd != e.out && len(e.embd.data) > 0 {
		spans = append(spans, e.embd.data)
	}
	mmapfile.PopulateHuge(spans)
}

// DecodeWeights returns the bytes of the weight matrices one decoded token
// streams, each once, in the order a token reads them: every layer's, then
// the output head. The token-embedding table, of which a token reads one
// row, is among them only as the head it also is in a tied model. They are
// the very bytes the kernels read (for a GGUF file a view of its mapping),
// so reading them (bench's memory-read probe) costs no memory; they stay
// valid while the model is open.
func (e *Engine) DecodeWeights() [][]byte {
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
	for i := range e.layers {
		l := &e.layers[i]
		add(l.wq, l.wk, l.wv, l.wo, l.wqkv, l.wz, l.wqkvz, l.wba, l.wbeta, l.walpha, l.wssmOut, l.wgate, l.wup, l.wdown)
	}
	add(e.out)
	return spans
}
