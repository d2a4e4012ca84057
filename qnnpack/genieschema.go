package qnnpack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Genie's configuration schema as data: the key lists of qnn-genie.md §1.1
// (Genie's Dialog.cpp validators, QAIRT 2.40). Genie rejects unknown keys
// at every level, so ValidateGenieConfig does too.

type kind uint8

const (
	kObj       kind = iota
	kObjOrObjs      // an object, or an array of objects (dialog.engine)
	kObjs           // a non-empty array of objects
	kStr
	kInt  // any integer
	kUint // integer ≥ 0
	kNum  // any number
	kBool
	kStrs
	kInts
	kNums
	kIntOrInts // eos-token
	kAny       // opaque (lora blocks, whose schema is not in §1.1)
)

var kindNames = [...]string{"object", "object or array of objects", "non-empty array of objects", "string",
	"integer", "non-negative integer", "number", "boolean", "array of strings", "array of integers",
	"array of numbers", "integer or array of integers", "any value"}

type key struct {
	name string
	req  bool
	kind kind
	enum []string // allowed string values
	keys []key    // for object kinds
}

func req(name string, k kind, sub ...key) key { return key{name: name, req: true, kind: k, keys: sub} }
func opt(name string, k kind, sub ...key) key { return key{name: name, kind: k, keys: sub} }
func enum(k key, values ...string) key        { k.enum = values; return k }

var (
	version = req("version", kUint)

	tokenPenaltyKeys = []key{version, opt("penalize-last-n", kInt), opt("repetition-penalty", kNum),
		opt("presence-penalty", kNum), opt("frequency-penalty", kNum)}

	samplerKeys = []key{version, opt("seed", kInt), opt("temp", kNum), opt("top-k", kInt), opt("top-p", kNum),
		opt("greedy", kBool), opt("type", kStr), opt("callback-name", kStr), opt("token-penalty", kObj, tokenPenaltyKeys...)}

	contextKeys = []key{version, req("bos-token", kInt), req("eos-token", kIntOrInts), req("size", kUint), req("n-vocab", kUint),
		opt("eot-token", kIntOrInts), opt("draft-n-vocab", kUint), opt("pad-token", kInt), opt("n-embd", kUint)}

	embeddingKeys = []key{version, req("size", kUint), enum(opt("type", kStr), "lut", "callback"), opt("lut-path", kStr),
		enum(opt("datatype", kStr), "float32", "native", "ufixed8", "ufixed16", "sfixed8", "sfixed16"),
		opt("quant-param", kObj, req("scale", kNum), req("offset", kInt))}

	qnnHtpKeys = []key{version, req("spill-fill-bufsize", kUint), req("mmap-budget", kUint), req("use-mmap", kBool),
		req("cpu-mask", kStr), req("poll", kBool),
		opt("kv-dim", kUint), opt("data-alignment-size", kUint), opt("kv-update-method", kStr), opt("allow-async-init", kBool),
		opt("enable-graph-switching", kBool), enum(opt("graph-switching-lora-policy", kStr), "lazy", "eager"),
		opt("shared-engine", kBool), opt("skip-lora-validation", kBool),
		opt("pos-id-dim", kUint), opt("rope-theta", kNum)} // legacy positional keys

	genAiKeys = []key{version, opt("use-mmap", kBool), opt("kv-quantization", kBool), opt("n-logits", kUint),
		opt("n-layer", kUint), opt("n-embd", kUint), opt("n-heads", kUint), opt("n-kv-heads", kUint),
		opt("model-input", kStr), opt("shared-engine", kBool)}

	backendKeys = []key{version, enum(req("type", kStr), "QnnHtp", "QnnGenAiTransformer", "QnnGpu"), opt("extensions", kStr),
		opt("QnnHtp", kObj, qnnHtpKeys...), opt("QnnGenAiTransformer", kObj, genAiKeys...)}

	ropeScalingKeys = []key{enum(req("rope-type", kStr), "llama3", "default", "longrope"), opt("factor", kNum),
		opt("low-freq-factor", kNum), opt("high-freq-factor", kNum), opt("original-max-position-embeddings", kUint),
		opt("short-factor", kNums), opt("long-factor", kNums)}

	positionalKeys = []key{enum(req("type", kStr), "rope", "absolute", "alibi"), opt("rope-dim", kUint),
		opt("rope-theta", kNum), opt("rope-scaling", kObj, ropeScalingKeys...)}

	modelKeys = []key{version, enum(req("type", kStr), "binary", "library"),
		opt("binary", kObj, version, req("ctx-bins", kStrs), opt("lora", kAny)),
		opt("library", kObj, version, req("model-bin", kStr), opt("lora", kAny)),
		opt("positional-encoding", kObj, positionalKeys...), opt("draft-token-map", kStr)}

	longContextKeys = []key{version, enum(req("type", kStr), "keydiff", "sliding-window"), opt("reserved-tokens", kUint),
		opt("keydiff", kObj, version, opt("scoring-network", kStr), opt("update-frequency", kUint)),
		opt("sliding-window", kObj, version, opt("window-size", kUint))}

	cacheGroupKeys = []key{version, req("prefix", kStr), opt("longcontext", kObj, longContextKeys...),
		opt("attention-mask-tensor-name", kStr), opt("cache-index-tensor-name", kStr)}

	engineKeys = []key{version, req("backend", kObj, backendKeys...), req("model", kObj, modelKeys...), req("n-threads", kUint),
		enum(opt("role", kStr), "draft", "target", "primary", "secondary"),
		opt("longcontext", kObj, longContextKeys...), opt("cache-groups", kObjs, cacheGroupKeys...)}

	// The dialog-type blocks, keyed by dialog.type.
	typeBlocks = []key{
		opt("ssd-q1", kObj, version, req("ssd-version", kUint), req("forecast-token-count", kUint), req("branches", kInts),
			req("forecast-prefix", kUint), req("forecast-prefix-name", kStr),
			enum(opt("branch-mode", kStr), "top-1", "all-expand"), opt("n-streams", kUint), opt("p-threshold", kNum)),
		opt("lade", kObj, version, enum(req("update-mode", kStr), "ALWAYS_FWD_ONE", "FWD_MAX_HIT", "FWD_LEVEL"),
			req("window", kUint), req("ngram", kUint), req("gcap", kUint)),
		opt("spd", kObj, version, req("draft-len", kUint)),
		opt("multistream", kObj, version, req("n-streams", kUint), req("p-threshold", kNum)),
		opt("eaglet", kObj, version, req("eaglet-version", kUint), req("draft-len", kUint), req("n-branches", kUint),
			req("max-tokens-target-can-evaluate", kUint), req("draft-kv-cache", kBool)),
		opt("kv-share", kObj, version, req("enable-in-memory-kv-share", kBool)),
	}

	dialogKeys = append([]key{version,
		enum(req("type", kStr), "basic", "ssd-q1", "lade", "spd", "multistream", "eaglet", "kv-share"),
		req("context", kObj, contextKeys...), req("tokenizer", kObj, version, req("path", kStr)),
		req("engine", kObjOrObjs, engineKeys...),
		opt("sampler", kObj, samplerKeys...), opt("embedding", kObj, embeddingKeys...),
		opt("stop-sequence", kStrs), opt("max-num-tokens", kUint), opt("accumulator-size", kUint),
		opt("debug", kObj, opt("path", kStr), opt("dump-tensors", kBool), opt("dump-specs", kBool), opt("dump-outputs", kBool)),
	}, typeBlocks...)

	topKeys = []key{req("dialog", kObj, dialogKeys...)}
)

// ValidateGenieConfig checks a genie_config.json against Genie's key lists:
// unknown keys, missing mandatory keys and wrong types at every level, then
// Genie's cross-field rules (one dialog-type block matching dialog.type,
// engine roles, ssd-q1 branches ≤ forecast-token-count, legacy positional
// keys exclusive with model.positional-encoding, embedding lut-path). All
// problems are reported, each with its JSON path.
func ValidateGenieConfig(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("genie config: not JSON: %w", err)
	}
	if dec.More() {
		return errors.New("genie config: trailing data after the JSON object")
	}
	v := &validator{}
	v.object("", root, topKeys)
	if len(v.errs) == 0 {
		v.rules(root.(map[string]any)["dialog"].(map[string]any))
	}
	if len(v.errs) > 0 {
		return fmt.Errorf("genie config: %d problem(s):\n  %s", len(v.errs), strings.Join(v.errs, "\n  "))
	}
	return nil
}

type validator struct{ errs []string }

func (v *validator) errorf(path, format string, args ...any) {
	if path == "" {
		path = "(top level)"
	}
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, args...))
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (v *validator) object(path string, x any, keys []key) {
	m, ok := x.(map[string]any)
	if !ok {
		v.errorf(path, "want an object, got %s", typeName(x))
		return
	}
	for _, k := range sortedKeys(m) {
		i := slices.IndexFunc(keys, func(s key) bool { return s.name == k })
		if i < 0 {
			v.errorf(path, "unknown key %q", k)
			continue
		}
		v.value(join(path, k), m[k], keys[i])
	}
	for _, s := range keys {
		if _, ok := m[s.name]; s.req && !ok {
			v.errorf(path, "missing mandatory key %q", s.name)
		}
	}
}

func (v *validator) value(path string, x any, s key) {
	bad := func() { v.errorf(path, "want %s, got %s", kindNames[s.kind], typeName(x)) }
	switch s.kind {
	case kAny:
	case kObj:
		v.object(path, x, s.keys)
	case kObjOrObjs, kObjs:
		if a, ok := x.([]any); ok {
			if len(a) == 0 {
				v.errorf(path, "empty array")
			}
			for i, e := range a {
				v.object(fmt.Sprintf("%s[%d]", path, i), e, s.keys)
			}
		} else if s.kind == kObjOrObjs {
			v.object(path, x, s.keys)
		} else {
			bad()
		}
	case kStr:
		str, ok := x.(string)
		if !ok {
			bad()
		} else if len(s.enum) > 0 && !slices.Contains(s.enum, str) {
			v.errorf(path, "%q is not one of %s", str, strings.Join(s.enum, ", "))
		}
	case kInt, kUint:
		if !isInt(x, s.kind == kUint) {
			bad()
		}
	case kNum:
		if _, ok := x.(json.Number); !ok {
			bad()
		}
	case kBool:
		if _, ok := x.(bool); !ok {
			bad()
		}
	case kStrs, kInts, kNums:
		a, ok := x.([]any)
		if !ok {
			bad()
			return
		}
		for i, e := range a {
			elem := map[kind]kind{kStrs: kStr, kInts: kInt, kNums: kNum}[s.kind]
			v.value(fmt.Sprintf("%s[%d]", path, i), e, key{kind: elem})
		}
	case kIntOrInts:
		if a, ok := x.([]any); ok {
			for i, e := range a {
				v.value(fmt.Sprintf("%s[%d]", path, i), e, key{kind: kInt})
			}
		} else if !isInt(x, false) {
			bad()
		}
	}
}

func isInt(x any, nonNeg bool) bool {
	n, ok := x.(json.Number)
	if !ok {
		return false
	}
	i, err := n.Int64()
	return err == nil && (!nonNeg || i >= 0)
}

func typeName(x any) string {
	switch x := x.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + x.String()
	case bool:
		return fmt.Sprint("boolean ", x)
	}
	return fmt.Sprintf("%T", x)
}

func num(m map[string]any, k string) (int64, bool) {
	n, ok := m[k].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// rules applies Genie's cross-field checks to a dialog that passed the
// key lists.
func (v *validator) rules(d map[string]any) {
	if n, _ := num(d, "version"); n != 1 {
		v.errorf("dialog.version", "must be 1")
	}
	typ := d["type"].(string)
	for _, b := range typeBlocks {
		_, has := d[b.name]
		switch {
		case has && b.name != typ:
			v.errorf("dialog."+b.name, "block given but dialog.type is %q", typ)
		case !has && b.name == typ:
			v.errorf("dialog", "dialog.type %q needs a %q block", typ, typ)
		}
	}
	var engines []map[string]any
	switch e := d["engine"].(type) {
	case map[string]any:
		engines = []map[string]any{e}
	case []any:
		for _, x := range e {
			engines = append(engines, x.(map[string]any))
		}
	}
	var roles []string
	for i, e := range engines {
		path := "dialog.engine"
		if _, multi := d["engine"].([]any); multi {
			path = fmt.Sprintf("dialog.engine[%d]", i)
		}
		if r, ok := e["role"].(string); ok {
			roles = append(roles, r)
		}
		model := e["model"].(map[string]any)
		mt := model["type"].(string)
		if _, ok := model[mt]; !ok {
			v.errorf(path+".model", "model.type %q needs a %q block", mt, mt)
		}
		backend := e["backend"].(map[string]any)
		bt := backend["type"].(string)
		if bt != "QnnGpu" {
			if _, ok := backend[bt]; !ok {
				v.errorf(path+".backend", "backend.type %q needs a %q block", bt, bt)
			}
		}
		if htp, ok := backend["QnnHtp"].(map[string]any); ok {
			_, pe := model["positional-encoding"]
			for _, legacy := range []string{"pos-id-dim", "rope-theta"} {
				if _, has := htp[legacy]; has && pe {
					v.errorf(path+".backend.QnnHtp."+legacy, "legacy key given together with model.positional-encoding")
				}
			}
		}
	}
	slices.Sort(roles)
	switch typ {
	case "spd", "eaglet":
		if !slices.Equal(roles, []string{"draft", "target"}) || len(engines) != 2 {
			v.errorf("dialog.engine", "dialog.type %q needs two engines with roles draft and target, got roles %v", typ, roles)
		}
	case "kv-share":
		if !slices.Equal(roles, []string{"primary", "secondary"}) || len(engines) != 2 {
			v.errorf("dialog.engine", "dialog.type kv-share needs two engines with roles primary and secondary, got roles %v", roles)
		}
	}
	if ssd, ok := d["ssd-q1"].(map[string]any); ok {
		if n, _ := num(ssd, "version"); n != 1 {
			v.errorf("dialog.ssd-q1.version", "must be 1")
		}
		branches := ssd["branches"].([]any)
		fc, _ := num(ssd, "forecast-token-count")
		if int64(len(branches)) > fc {
			v.errorf("dialog.ssd-q1.branches", "%d levels but forecast-token-count is %d (Genie needs len(branches) ≤ forecast-token-count)", len(branches), fc)
		}
		for i := range branches {
			if b, _ := num(map[string]any{"b": branches[i]}, "b"); b <= 0 {
				v.errorf(fmt.Sprintf("dialog.ssd-q1.branches[%d]", i), "must be positive")
			}
		}
		if _, ok := ssd["p-threshold"]; ok {
			if n, _ := num(ssd, "n-streams"); n <= 1 {
				v.errorf("dialog.ssd-q1.p-threshold", "only allowed with n-streams > 1")
			}
		}
	}
	if emb, ok := d["embedding"].(map[string]any); ok {
		_, hasPath := emb["lut-path"]
		if (emb["type"] == "lut") != hasPath {
			v.errorf("dialog.embedding", "lut-path is required exactly when type is \"lut\"")
		}
	}
}
