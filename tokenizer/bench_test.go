package tokenizer

import (
	"os"
	"strings"
	"testing"
)

// benchText is about 100 KB of mixed text: the stories260K outputs and the
// llama.cpp tokenizer test strings, repeated.
func benchText(b *testing.B) string {
	var parts []string
	for _, p := range []string{storiesPath(b, "greedy_t0_n256.txt"), vocabPath(b, "qwen35") + ".inp", vocabPath(b, "qwen2") + ".inp"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Skip(err)
		}
		parts = append(parts, strings.ReplaceAll(string(data), "__ggml_vocab_test__", ""))
	}
	text := strings.Join(parts, "\n")
	return strings.Repeat(text, 100_000/len(text)+1)
}

func benchmarkEncode(b *testing.B, name string) {
	tok, _ := loadGGUF(b, vocabPath(b, name))
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	var n int
	for b.Loop() {
		n = len(tok.Encode(text, false))
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkEncodeQwen2(b *testing.B)    { benchmarkEncode(b, "qwen2") }
func BenchmarkEncodeLlamaBPE(b *testing.B) { benchmarkEncode(b, "llama-bpe") }
func BenchmarkEncodeLlamaSPM(b *testing.B) { benchmarkEncode(b, "llama-spm") }

// BenchmarkEncodeQwen2Cold encodes text whose words were not seen before.
func BenchmarkEncodeQwen2Cold(b *testing.B) {
	tok, _ := loadGGUF(b, vocabPath(b, "qwen2"))
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	var n int
	for b.Loop() {
		tok.cache.mu.Lock()
		tok.cache.m = nil
		tok.cache.mu.Unlock()
		n = len(tok.Encode(text, false))
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeQwen2(b *testing.B) {
	tok, _ := loadGGUF(b, vocabPath(b, "qwen2"))
	text := benchText(b)
	ids := tok.Encode(text, false)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Decode(ids)
	}
}

func BenchmarkNewQwen2(b *testing.B) {
	tok, _ := loadGGUF(b, vocabPath(b, "qwen2"))
	for b.Loop() {
		if _, err := New(tok.Vocab()); err != nil {
			b.Fatal(err)
		}
	}
}
