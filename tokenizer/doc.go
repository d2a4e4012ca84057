// Package tokenizer turns text into token ids and back for the vocabularies
// qnnprep handles: SentencePiece-style vocabularies ("llama": llama.cpp's
// llm_tokenizer_spm, e.g. Llama 2, Phi-3, llama2.c's tok512) and GPT-2
// byte-level BPE ("gpt2": Qwen2/2.5/3, Qwen3.5, Llama 3, GPT-2, MPT,
// Falcon, StarCoder, Refact, DeepSeek-Coder).
//
// A Vocab is independent of any file format. FromGGUF reads the
// tokenizer.ggml.* keys, FromHF a Hugging Face tokenizer.json directory,
// FromLlama2c a llama2.c tokenizer.bin; Vocab.GGUFMetadata writes the keys
// llama.cpp reads, WriteHF a Hugging Face tokenizer.json that encodes like
// this package (checked against Tokenizers.js on every test vocabulary).
// New builds a Tokenizer from a Vocab.
//
// # Encoding
//
// Encoding follows llama.cpp's llama_tokenize: special tokens are split
// out of the text first (longest first), then SPM merges UTF-8 characters
// by score with <0xXX> byte fallback, or BPE pre-tokenizes, maps bytes to
// characters and merges by rank. The ids agree with llama.cpp's test
// vocabularies, whose expected ids come from Hugging Face tokenizers.
// Encode parses special tokens in the text (llama.cpp parse_special=true,
// as llama-cli does for prompts and as Hugging Face's encode does);
// EncodeWith(text, addSpecial, false) matches only user-defined tokens and
// leaves control-token text ("<|im_end|>") to ordinary tokenization.
//
// Like llama.cpp, tokens it recognises by their text as end-of-turn,
// end-of-generation or fill-in-the-middle markers (<|im_end|>,
// <|endoftext|>, <｜fim▁begin｜>, ...) count as control tokens whatever
// type the vocabulary gives them; IsEOG reports the ids that end
// generation. Both were checked against llama.cpp v0.4.0 (node-llama-cpp)
// on every test vocabulary.
//
// Differences from llama.cpp, all deliberate: the qwen2, mpt and olmo
// pre-tokenizers NFC-normalise the text as their Hugging Face tokenizers do
// (llama.cpp does not, so ids differ for non-NFC text; qwen35 does not,
// as llama.cpp's qwen35 test expects); bytes that are not valid UTF-8 are
// kept as they are (llama.cpp turns them into U+FFFD before BPE); the
// lstrip/rstrip attributes llama.cpp sets by model name (Phi-3's special
// tokens, jina's <mask>) are not applied.
//
// # Decoding and round trips
//
// Decode(Encode(s, false)) == s holds:
//   - for byte-level BPE vocabularies, for every s (NFC(s) for the
//     NFC-normalising ones), invalid UTF-8 included;
//   - for SPM vocabularies, for valid UTF-8 s without U+2581 ("▁", which SPM
//     cannot tell from a space). Decode removes the space Encode puts before
//     the text at the start and after every special token.
//
// llama.cpp itself does not round-trip in these cases: its SPM detokenize
// removes only the first leading space, so "a</s>b" (parse_special) comes
// back as "a</s> b"; its BPE detokenize applies clean_spaces for most
// pre-tokenizers (measured: gpt-2, llama-bpe, mpt, starcoder, refact,
// falcon; not qwen2, qwen35 or deepseek-coder), dropping the space in
// " ?", " !", " .", " ," and before contractions like " 've"; and invalid
// UTF-8 comes back as U+FFFD. Decode does none of this; for qwen2, qwen35
// and deepseek-coder it equals llama_detokenize with special tokens
// rendered (checked against llama.cpp in the peer test).
package tokenizer
