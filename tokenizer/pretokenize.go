package tokenizer

import (
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizers split text into words before BPE. The Hugging Face
// tokenizers these vocabularies come from use Oniguruma regexes with
// look-ahead (\s+(?!\S)), which Go's regexp lacks, so the regexes are
// written here as scanners that try the alternatives in order at each
// position, with the same leftmost-first backtracking results. Where a
// tokenizer applies several splits in sequence, each later split works on
// each piece of the previous one independently (a piece's end is the end of
// the string for look-ahead), as both HF and llama.cpp do.

// Character classes of one code point.
const (
	cL      uint8 = 1 << iota // \p{L}
	cN                        // \p{N}
	cM                        // \p{M}
	cS                        // \s: Unicode White_Space
	cNL                       // \r or \n
	cP                        // \p{P}
	cASCIIP                   // ASCII punctuation that Unicode calls a symbol: $+<=>^`|~
	cDigit                    // 0-9
)

var asciiClass [128]uint8

func init() {
	for r := rune(0); r < 128; r++ {
		asciiClass[r] = classify(r)
	}
}

func classify(r rune) uint8 {
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c |= cL
	case unicode.IsNumber(r):
		c |= cN
		if r >= '0' && r <= '9' {
			c |= cDigit
		}
	case unicode.IsMark(r):
		c |= cM
	case unicode.IsSpace(r):
		c |= cS
		if r == '\r' || r == '\n' {
			c |= cNL
		}
	case unicode.IsPunct(r):
		c |= cP
	}
	if strings.ContainsRune("$+<=>^`|~", r) {
		c |= cASCIIP
	}
	return c
}

// cps is a piece decoded into code points with their classes. Invalid UTF-8
// bytes become one code point each with no class (like a symbol), so the
// original bytes survive splitting.
type cps struct {
	cls   []uint8
	runes []rune
	offs  []int // byte offset of each code point, plus len(s) at the end
}

func (c *cps) decode(s string) {
	c.cls, c.runes, c.offs = c.cls[:0], c.runes[:0], c.offs[:0]
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			c.cls = append(c.cls, asciiClass[b])
			c.runes = append(c.runes, rune(b))
			c.offs = append(c.offs, i)
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		var cl uint8
		if r != utf8.RuneError || w > 1 {
			cl = classify(r)
		}
		c.cls = append(c.cls, cl)
		c.runes = append(c.runes, r)
		c.offs = append(c.offs, i)
		i += w
	}
	c.offs = append(c.offs, len(s))
}

func (c *cps) len() int { return len(c.cls) }

// run returns the end of the run of code points from i whose class has a bit in mask.
func (c *cps) run(i int, mask uint8) int {
	for i < len(c.cls) && c.cls[i]&mask != 0 {
		i++
	}
	return i
}

// matcher returns the end of the match at code point i, or i for none.
type matcher func(c *cps, i int) int

// A stage splits a piece into sub-pieces.
type stage interface {
	split(c *cps, s string, dst []string) []string
}

// isolated is a Split with behavior "isolated": matches and the gaps
// between them both become pieces.
type isolated matcher

func (m isolated) split(c *cps, s string, dst []string) []string {
	c.decode(s)
	n := c.len()
	gap := 0
	for i := 0; i < n; {
		e := m(c, i)
		if e <= i {
			i++
			continue
		}
		if gap < i {
			dst = append(dst, s[c.offs[gap]:c.offs[i]])
		}
		dst = append(dst, s[c.offs[i]:c.offs[e]])
		i, gap = e, e
	}
	if gap < n {
		dst = append(dst, s[c.offs[gap]:])
	}
	return dst
}

// regexStage is an isolated split by a regex without look-ahead.
type regexStage struct{ re *regexp.Regexp }

func (r regexStage) split(_ *cps, s string, dst []string) []string {
	last := 0
	for _, m := range r.re.FindAllStringIndex(s, -1) {
		if m[0] == m[1] {
			continue
		}
		if last < m[0] {
			dst = append(dst, s[last:m[0]])
		}
		dst = append(dst, s[m[0]:m[1]])
		last = m[1]
	}
	if last < len(s) {
		dst = append(dst, s[last:])
	}
	return dst
}

// unicodeSpace stands for \s in patterns compiled with Go's regexp, whose \s is ASCII-only.
const unicodeSpace = `[\t\n\v\f\r \x{85}\p{Z}]`

func mustRegexStage(pat string) regexStage {
	return regexStage{regexp.MustCompile(strings.ReplaceAll(pat, `\s`, unicodeSpace))}
}

// contraction matches 's 't 're 've 'm 'll 'd at i (ASCII case-insensitive
// when fold is set, as llama.cpp rewrites the (?i:...) group).
func contraction(c *cps, i int, fold bool) int {
	n := c.len()
	if c.runes[i] != '\'' || i+1 >= n {
		return i
	}
	lower := func(r rune) rune {
		if fold && r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	a := lower(c.runes[i+1])
	switch a {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 >= n {
		return i
	}
	b := lower(c.runes[i+2])
	switch {
	case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
		return i + 3
	}
	return i
}

// spaces matches \s+(?!\S)|\s+ at a whitespace code point i: the whole run,
// except that one whitespace character is left for the next word when a
// non-space follows.
func spaces(c *cps, i int) int {
	e := c.run(i, cS)
	if e < c.len() && e-1 > i {
		return e - 1
	}
	return e
}

// gpt2Match is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2Match(c *cps, i int) int {
	if e := contraction(c, i, false); e > i {
		return e
	}
	j := i
	if c.runes[i] == ' ' && i+1 < c.len() {
		j++
	}
	switch cl := c.cls[j]; {
	case cl&cL != 0:
		return c.run(j, cL)
	case cl&cN != 0:
		return c.run(j, cN)
	case cl&(cS|cL|cN) == 0:
		return runNot(c, j, cS|cL|cN)
	}
	if c.cls[i]&cS != 0 {
		return spaces(c, i)
	}
	return i
}

func runNot(c *cps, i int, mask uint8) int {
	for i < c.len() && c.cls[i]&mask == 0 {
		i++
	}
	return i
}

// qwenMatcher builds the Qwen2 / Llama 3 / Qwen3.5 family:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?WORD+|\p{N}{1,maxDigits}| ?[^\s WORD \p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where WORD is \p{L} (qwen2, llama3) or [\p{L}\p{M}] (qwen35).
func qwenMatcher(word uint8, maxDigits int) matcher {
	return func(c *cps, i int) int {
		if e := contraction(c, i, true); e > i {
			return e
		}
		n := c.len()
		cl := c.cls[i]
		// [^\r\n\p{L}\p{N}]?WORD+ (a mark may serve as the optional prefix,
		// which gives the same match as WORD+ from i)
		if cl&word != 0 {
			return c.run(i, word)
		}
		if cl&(cNL|cL|cN) == 0 && i+1 < n && c.cls[i+1]&word != 0 {
			return c.run(i+1, word)
		}
		if cl&cN != 0 {
			e := i + 1
			for e < n && e-i < maxDigits && c.cls[e]&cN != 0 {
				e++
			}
			return e
		}
		// ?[^\s WORD \p{N}]+[\r\n]*
		j := i
		if c.runes[i] == ' ' && i+1 < n {
			j++
		}
		if c.cls[j]&(cS|word|cN) == 0 {
			e := runNot(c, j, cS|word|cN)
			return c.run(e, cNL)
		}
		if cl&cS == 0 {
			return i
		}
		// \s*[\r\n]+: up to and including the last \r or \n of the whitespace run
		e := c.run(i, cS)
		for k := e - 1; k >= i; k-- {
			if c.cls[k]&cNL != 0 {
				return k + 1
			}
		}
		return spaces(c, i)
	}
}

// runOf matches a run of code points whose class has a bit in mask.
func runOf(mask uint8) matcher {
	return func(c *cps, i int) int { return c.run(i, mask) }
}

// oneOf matches a single code point whose class has a bit in mask.
func oneOf(mask uint8) matcher {
	return func(c *cps, i int) int {
		if c.cls[i]&mask != 0 {
			return i + 1
		}
		return i
	}
}

// threeDigits is [0-9][0-9][0-9].
func threeDigits(c *cps, i int) int {
	if i+3 <= c.len() && c.cls[i]&c.cls[i+1]&c.cls[i+2]&cDigit != 0 {
		return i + 3
	}
	return i
}

// preTokenizer describes how a vocabulary splits text into words.
type preTokenizer struct {
	nfc          bool    // NFC-normalise text first (the HF tokenizer has an NFC normalizer)
	stages       []stage // applied in order, each to every piece of the previous one
	byteLevelAt  int     // pieces are mapped to byte-level characters after this many stages
	ignoreMerges bool    // a word that is itself a token is not merged (Llama 3)
}

var (
	gpt2Stage  = isolated(gpt2Match)
	qwen2Stage = isolated(qwenMatcher(cL, 1))
)

// preTokenizers maps tokenizer.ggml.pre names to their splitting rules.
// Each follows the HF tokenizer.json of the model family (which the
// llama.cpp test vocabularies' expected ids come from).
var preTokenizers = map[string]*preTokenizer{
	// llama.cpp's fallback for BPE vocabularies without a known pre-tokenizer.
	"default": {stages: []stage{isolated(runOf(cP | cASCIIP)), gpt2Stage, isolated(runOf(cN)), isolated(threeDigits)}, byteLevelAt: 4},
	"gpt-2":   {stages: []stage{gpt2Stage}, byteLevelAt: 1},
	// GPT-NeoX tokenizer: NFC, then the GPT-2 regex.
	"mpt":  {nfc: true, stages: []stage{gpt2Stage}, byteLevelAt: 1},
	"olmo": {nfc: true, stages: []stage{gpt2Stage}, byteLevelAt: 1},
	// Digits(individual_digits=true), then the GPT-2 regex.
	"starcoder": {stages: []stage{isolated(oneOf(cN)), gpt2Stage}, byteLevelAt: 2},
	"refact":    {stages: []stage{isolated(oneOf(cN)), gpt2Stage}, byteLevelAt: 2},
	"smollm":    {stages: []stage{isolated(oneOf(cN)), gpt2Stage}, byteLevelAt: 2},
	// Punctuation(contiguous), ByteLevel(use_regex), Digits(contiguous),
	// Split([0-9]{3}): the last two see byte-level characters.
	"falcon": {stages: []stage{isolated(runOf(cP | cASCIIP)), gpt2Stage, isolated(runOf(cN)), isolated(threeDigits)}, byteLevelAt: 2},
	"deepseek-coder": {stages: []stage{
		mustRegexStage(`[\r\n]`),
		mustRegexStage(`\s?\p{L}+`),
		mustRegexStage(`\s?\p{P}+`),
		mustRegexStage(`[一-龥ࠀ-一가-퟿]+`),
		mustRegexStage(`\p{N}`),
	}, byteLevelAt: 5},
	"qwen2": {nfc: true, stages: []stage{qwen2Stage}, byteLevelAt: 1},
	// No NFC: llama.cpp's qwen35 test pair expects "e\u0301" to stay two code points.
	"qwen35":    {stages: []stage{isolated(qwenMatcher(cL|cM, 1))}, byteLevelAt: 1},
	"llama-bpe": {stages: []stage{isolated(qwenMatcher(cL, 3))}, byteLevelAt: 1, ignoreMerges: true},
}

func init() {
	// Names llama.cpp treats as the same pre-tokenizer.
	for alias, name := range map[string]string{
		"llama3": "llama-bpe", "llama-v3": "llama-bpe", "falcon3": "llama-bpe",
		"deepseek-r1-qwen": "qwen2", "stablelm2": "qwen2", "megrez": "qwen2",
		"codeshell": "starcoder", "exaone": "starcoder", "command-r": "starcoder", "minerva-7b": "starcoder",
		"jais": "gpt-2",
	} {
		preTokenizers[alias] = preTokenizers[name]
	}
}

// PreTokenizers lists the supported tokenizer.ggml.pre names, sorted.
func PreTokenizers() []string {
	names := make([]string, 0, len(preTokenizers))
	for k := range preTokenizers {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
