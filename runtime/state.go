package runtime

import (
	"fmt"

	"github.com/qnnprep/qnnprep/model"
)

// State is one sequence's memory: the KV cache of every attention layer and
// the conv and recurrent state of every Gated DeltaNet layer. A State
// belongs to one Engine and is used by one goroutine at a time.
type State struct {
	e      *Engine
	layers []layerState
	// rollback is how many per-token GDN snapshots each DeltaNet layer
	// keeps (see SetRollback).
	rollback int
	scr      scratch
	// ropeQ, when set, quantizes each position's RoPE tables before the
	// layers rotate by them (a Staged simulation's position encodings).
	ropeQ func(cos, sin []float32)
}

type layerState struct {
	kind model.LayerKind
	n    int // positions (tokens) this layer has processed

	// attention: per KV head, [slot][head_dim], K after norm and rope, V
	// raw. Head-major, so that attention's walk over one KV head's slots
	// reads memory in order (slot-major, the rows of a head were strided
	// by kv_heads·head_dim and read at half the bandwidth at depth).
	k, v [][]float32

	// DeltaNet: conv holds the raw (pre-conv) projection rows of the last
	// K−1 tokens, oldest first, [K−1][conv_dim]; ssm is [Hv][Dk][Dv].
	conv, ssm []float32
	snaps     []gdnSnap // state after token n, for rollback; oldest first
	// spare holds dropped snapshots' buffers for pushSnap: speculative
	// decoding drops and takes snapshots every window, and allocating
	// them anew cleared and collected the whole recurrent state each time.
	spare []gdnSnap
}

type gdnSnap struct {
	n         int
	conv, ssm []float32
}

// NewState returns an empty State (position 0).
func (e *Engine) NewState() *State {
	s := &State{e: e, layers: make([]layerState, len(e.layers))}
	c := &e.cfg
	for i := range s.layers {
		ls := &s.layers[i]
		ls.kind = e.layers[i].kind
		if ls.kind == model.Attention {
			ls.k, ls.v = make([][]float32, c.KVHeads), make([][]float32, c.KVHeads)
		}
		if ls.kind == model.DeltaNet {
			ls.conv = make([]float32, (c.ConvKernel-1)*c.ConvDim())
			ls.ssm = make([]float32, c.SSMValueHeads*c.SSMKeyDim*c.SSMValueDim)
		}
	}
	return s
}

// reserve makes room for n positions (at most the context) in every
// attention layer's KV cache at once, so that a pass or a run that knows
// its length holds the cache it fills and no more: grown step by step
// (growCache doubles), the cache would hold up to twice the positions
// used, and each outgrown copy would stay on the heap until a collection
// (a 500-token run of the 700M Q1_0 model peaked at 1.27× its file and
// cache).
func (s *State) reserve(n int) {
	n = min(n, s.e.ctxLen)
	d := s.e.cfg.HeadDim
	for i := range s.layers {
		ls := &s.layers[i]
		if ls.kind != model.Attention {
			continue
		}
		for h := range ls.k {
			if cap(ls.k[h]) < n*d {
				ls.k[h] = append(make([]float32, 0, n*d), ls.k[h]...)
				ls.v[h] = append(make([]float32, 0, n*d), ls.v[h]...)
			}
		}
	}
}

// growKV makes the cache of an attention layer n positions long (growCache
// per KV head: its old slots stay, the new ones are to be written).
func (ls *layerState) growKV(n, d int) {
	for h := range ls.k {
		ls.k[h] = growCache(ls.k[h], n*d)
		ls.v[h] = growCache(ls.v[h], n*d)
	}
}

// cutKV drops an attention layer's cache slots from n on.
func (ls *layerState) cutKV(n, d int) {
	for h := range ls.k {
		ls.k[h], ls.v[h] = ls.k[h][:n*d], ls.v[h][:n*d]
	}
}

func cloneHeads(b [][]float32) [][]float32 {
	if b == nil {
		return nil
	}
	c := make([][]float32, len(b))
	for h := range b {
		c[h] = append([]float32(nil), b[h]...)
	}
	return c
}

// Len is the number of positions the State holds: the tokens processed so
// far. After a partial RunLayers the layers may differ; Len reports layer
// 0's count and LayerLen each layer's.
func (s *State) Len() int {
	if len(s.layers) == 0 {
		return 0
	}
	return s.layers[0].n
}

// LayerLen is the number of positions layer i has processed.
func (s *State) LayerLen(i int) int { return s.layers[i].n }

// Engine returns the Engine the State belongs to.
func (s *State) Engine() *Engine { return s.e }

// Clone returns an independent copy of the State.
func (s *State) Clone() *State {
	c := &State{e: s.e, layers: make([]layerState, len(s.layers)), rollback: s.rollback}
	for i, ls := range s.layers {
		d := &c.layers[i]
		d.kind, d.n = ls.kind, ls.n
		d.k, d.v = cloneHeads(ls.k), cloneHeads(ls.v)
		d.conv = append([]float32(nil), ls.conv...)
		d.ssm = append([]float32(nil), ls.ssm...)
		for _, sn := range ls.snaps {
			d.snaps = append(d.snaps, gdnSnap{sn.n, append([]float32(nil), sn.conv...), append([]float32(nil), sn.ssm...)})
		}
	}
	return c
}

// Reset empties the State (position 0), keeping its buffers.
func (s *State) Reset() {
	for i := range s.layers {
		ls := &s.layers[i]
		ls.n = 0
		ls.cutKV(0, 0)
		clear(ls.conv)
		clear(ls.ssm)
		ls.dropSnaps(0)
	}
}

// SetRollback makes every DeltaNet layer keep a copy of its conv and
// recurrent state after each of the last n tokens it processes, so that
// Truncate can move back up to n positions on hybrid models (speculative
// verification, §7.1 of the architecture reference). Attention-only models
// need no snapshots: their KV cache is truncated in place. Snapshots cost
// (K−1)·conv_dim + Hv·Dk·Dv floats per layer per token.
func (s *State) SetRollback(n int) {
	if n < 0 {
		n = 0
	}
	s.rollback = n
	for i := range s.layers {
		ls := &s.layers[i]
		if d := len(ls.snaps) - n; d > 0 {
			ls.spare = append(ls.spare, ls.snaps[:d]...)
			m := copy(ls.snaps, ls.snaps[d:])
			clear(ls.snaps[m:])
			ls.snaps = ls.snaps[:m]
		}
	}
}

// Truncate rolls the State back to n positions: attention layers drop the
// KV entries at slots ≥ n; DeltaNet layers restore the state they had right
// after token n−1, which must be one of the snapshots kept by SetRollback
// (or n = 0, or n = the current length).
func (s *State) Truncate(n int) error {
	if n < 0 {
		return fmt.Errorf("runtime: truncate to %d positions", n)
	}
	c := &s.e.cfg
	// Check first so that a failed Truncate changes nothing.
	for i := range s.layers {
		ls := &s.layers[i]
		if n > ls.n {
			return fmt.Errorf("runtime: truncate to %d positions, but layer %d holds only %d", n, i, ls.n)
		}
		if ls.kind == model.DeltaNet && n != ls.n && n != 0 && ls.snap(n) == nil {
			return fmt.Errorf("runtime: cannot roll DeltaNet layer %d back from %d to %d positions: no snapshot (SetRollback keeps %d)", i, ls.n, n, s.rollback)
		}
	}
	for i := range s.layers {
		ls := &s.layers[i]
		if n == ls.n {
			continue
		}
		if ls.kind == model.Attention {
			ls.cutKV(n, c.HeadDim)
		} else if n == 0 {
			clear(ls.conv)
			clear(ls.ssm)
		} else {
			sn := ls.snap(n)
			copy(ls.conv, sn.conv)
			copy(ls.ssm, sn.ssm)
		}
		ls.n = n
		j := 0
		for j < len(ls.snaps) && ls.snaps[j].n <= n {
			j++
		}
		ls.dropSnaps(j)
	}
	return nil
}

func (ls *layerState) snap(n int) *gdnSnap {
	for i := range ls.snaps {
		if ls.snaps[i].n == n {
			return &ls.snaps[i]
		}
	}
	return nil
}

// dropSnaps keeps the snapshots before index j and sets the others'
// buffers aside for pushSnap.
func (ls *layerState) dropSnaps(j int) {
	ls.spare = append(ls.spare, ls.snaps[j:]...)
	clear(ls.snaps[j:])
	ls.snaps = ls.snaps[:j]
}

// pushSnap records the layer's GDN state after its current token, reusing
// the oldest snapshot's buffers once keep are held.
func (ls *layerState) pushSnap(keep int) {
	if keep <= 0 {
		return
	}
	var sn gdnSnap
	if len(ls.snaps) >= keep {
		sn = ls.snaps[0]
		copy(ls.snaps, ls.snaps[1:])
		ls.snaps = ls.snaps[:len(ls.snaps)-1]
	} else if k := len(ls.spare); k > 0 {
		sn = ls.spare[k-1]
		ls.spare[k-1] = gdnSnap{}
		ls.spare = ls.spare[:k-1]
	} else {
		sn = gdnSnap{conv: make([]float32, len(ls.conv)), ssm: make([]float32, len(ls.ssm))}
	}
	sn.n = ls.n
	copy(sn.conv, ls.conv)
	copy(sn.ssm, ls.ssm)
	ls.snaps = append(ls.snaps, sn)
}

// KV returns a copy of attention layer i's cache, Len(i) positions of
// KVHeads·HeadDim values each (slot-major): K after the q/k norm and
// RoPE, V as projected (binary16-rounded with Options.KVF16). Both are
// nil for a DeltaNet layer.
func (s *State) KV(i int) (k, v []float32) {
	ls := &s.layers[i]
	if ls.kind != model.Attention {
		return nil, nil
	}
	return slotMajor(ls.k, ls.n, s.e.cfg.HeadDim), slotMajor(ls.v, ls.n, s.e.cfg.HeadDim)
}

// slotMajor gathers n slots of per-head rows of d values into
// [slot][head][d].
func slotMajor(heads [][]float32, n, d int) []float32 {
	nkv := len(heads)
	out := make([]float32, n*nkv*d)
	for h, b := range heads {
		for j := 0; j < n; j++ {
			copy(out[(j*nkv+h)*d:(j*nkv+h+1)*d], b[j*d:(j+1)*d])
		}
	}
	return out
}

// DeltaNet returns DeltaNet layer i's state: conv, the raw projection
// rows of the last K−1 tokens, oldest first, [K−1][conv_dim] (the
// transpose of the plan's past_conv surface [conv_dim, K−1]); and ssm,
// the recurrent state [Hv][Dk][Dv] (the plan's past_ssm). The slices alias
// the State. Both are nil for an attention layer.
func (s *State) DeltaNet(i int) (conv, ssm []float32) {
	ls := &s.layers[i]
	return ls.conv, ls.ssm
}

// Compact keeps the cache slots [0, from) and then the slots listed in
// keep (increasing, each ≥ from), moved down to from, from+1, …: the
// accepted path after verifying a tree of draft tokens in one RunLayers
// call. Their K entries keep the RoPE positions they were computed with.
// DeltaNet state cannot be compacted: on hybrid models keep must be the
// chain from, from+1, … (a Truncate).
func (s *State) Compact(from int, keep []int) error {
	n := s.Len()
	if from < 0 || from > n {
		return fmt.Errorf("runtime: compact from %d outside [0, %d]", from, n)
	}
	prev := from - 1
	chain := true
	for i, j := range keep {
		if j <= prev || j >= n {
			return fmt.Errorf("runtime: compact: slot %d out of order or outside [%d, %d)", j, from, n)
		}
		prev = j
		chain = chain && j == from+i
	}
	for i := range s.layers {
		if s.layers[i].n != n {
			return fmt.Errorf("runtime: compact: layer %d holds %d positions, layer 0 %d", i, s.layers[i].n, n)
		}
	}
	if chain {
		return s.Truncate(from + len(keep))
	}
	for i := range s.layers {
		if s.layers[i].kind == model.DeltaNet {
			return fmt.Errorf("runtime: compact: DeltaNet layer %d cannot keep a non-contiguous set of slots", i)
		}
	}
	hd := s.e.cfg.HeadDim
	for i := range s.layers {
		ls := &s.layers[i]
		for h := range ls.k {
			k, v := ls.k[h], ls.v[h]
			for d, j := range keep {
				copy(k[(from+d)*hd:(from+d+1)*hd], k[j*hd:(j+1)*hd])
				copy(v[(from+d)*hd:(from+d+1)*hd], v[j*hd:(j+1)*hd])
			}
		}
		ls.n = from + len(keep)
		ls.cutKV(ls.n, hd)
	}
	return nil
}
