package peers

import "fmt"

// HFTokenize encodes texts with @huggingface/tokenizers loading the
// tokenizer.json at path alone (no tokenizer_config.json): plain without
// and special with the special tokens its post-processor adds.
func HFTokenize(path string, texts []string) (plain, special [][]int32, err error) {
	var r struct{ Plain, Special [][]int32 }
	if err := runNode(HFTokenizers, "hf_tokenize.mjs", map[string]any{"path": path, "texts": texts}, &r); err != nil {
		return nil, nil, fmt.Errorf("peers: @huggingface/tokenizers on %s: %w", path, err)
	}
	if len(r.Plain) != len(texts) || len(r.Special) != len(texts) {
		return nil, nil, fmt.Errorf("peers: @huggingface/tokenizers on %s: %d/%d results for %d texts", path, len(r.Plain), len(r.Special), len(texts))
	}
	return r.Plain, r.Special, nil
}
