package model

// Row and head permutations between Hugging Face and llama.cpp layouts.
// Each index function returns, for every output row, the source row it
// copies; gatherRows applies it to raw bytes of any ggml type.

// gatherRows returns a new slice holding rows idx[0], idx[1], … of src,
// each rowBytes long.
func gatherRows(src []byte, rowBytes int, idx []int) []byte {
	out := make([]byte, len(idx)*rowBytes)
	for i, r := range idx {
		copy(out[i*rowBytes:(i+1)*rowBytes], src[r*rowBytes:(r+1)*rowBytes])
	}
	return out
}

// ropeRows undoes Hugging Face's rotate-half layout of llama q/k rows (or
// bias elements) so ggml's NORM rope, which rotates adjacent pairs, gives
// the same result: GGUF row h·D + 2i + s is HF row h·D + s·D/2 + i.
func ropeRows(heads, headDim int) []int {
	idx := make([]int, heads*headDim)
	half := headDim / 2
	for h := range heads {
		for i := range half {
			for s := range 2 {
				idx[h*headDim+2*i+s] = h*headDim + s*half + i
			}
		}
	}
	return idx
}

// tiledHeads is llama.cpp's qwen35 value-head order: value heads grouped
// by key head (h = g·r + j, Hugging Face) become tiled (h' = j·Hk + g), so
// value head h' uses key head h' mod Hk. Entry h' is the old head.
func tiledHeads(hk, hv int) []int {
	r := hv / hk
	idx := make([]int, hv)
	for h := range idx {
		idx[h] = (h%hk)*r + h/hk
	}
	return idx
}

// headRows expands a head order to rows: each head is per rows, and the
// whole block starts at row base in both source and output.
func headRows(order []int, per, base int, idx []int) []int {
	for _, h := range order {
		for d := range per {
			idx = append(idx, base+h*per+d)
		}
	}
	return idx
}

// identity appends rows base … base+n-1.
func identity(n, base int, idx []int) []int {
	for i := range n {
		idx = append(idx, base+i)
	}
	return idx
}

// vHeadRows is the qwen35 reorder of in_proj_qkv: q and k rows stay, the
// v rows move by head.
func vHeadRows(c *Config) []int {
	keyDim := c.SSMKeyHeads * c.SSMKeyDim
	idx := make([]int, 0, c.ConvDim())
	idx = identity(2*keyDim, 0, idx)
	return headRows(tiledHeads(c.SSMKeyHeads, c.SSMValueHeads), c.SSMValueDim, 2*keyDim, idx)
}

// colBlocks permutes, inside each of rows rows, the column blocks of one
// value head each (out_proj's input columns): it returns the order of
// blocks of the row-major matrix.
func colBlocks(rows int, order []int) []int {
	idx := make([]int, 0, rows*len(order))
	for r := range rows {
		for _, h := range order {
			idx = append(idx, r*len(order)+h)
		}
	}
	return idx
}

// qkvzRows de-interleaves Qwen3-Next's in_proj_qkvz. Its rows are grouped
// by key head g, [q (Dk) | k (Dk) | v (r·Dv) | z (r·Dv)]; the result is
// attn_qkv = q_flat ‖ k_flat ‖ v_flat and attn_gate = z, value heads in
// grouped order h = g·r + j.
func qkvzRows(c *Config) (qkv, z []int) {
	hk, dk, dv := c.SSMKeyHeads, c.SSMKeyDim, c.SSMValueDim
	rdv := c.SSMValueHeads / hk * dv
	group := 2*dk + 2*rdv
	qkv = make([]int, 0, c.ConvDim())
	for _, off := range []int{0, dk} { // q then k
		for g := range hk {
			qkv = identity(dk, g*group+off, qkv)
		}
	}
	for g := range hk {
		qkv = identity(rdv, g*group+2*dk, qkv)
	}
	z = make([]int, 0, hk*rdv)
	for g := range hk {
		z = identity(rdv, g*group+2*dk+rdv, z)
	}
	return qkv, z
}

// baRows splits Qwen3-Next's in_proj_ba, grouped by key head as
// [b (r) | a (r)], into beta and alpha rows in value-head order.
func baRows(c *Config) (b, a []int) {
	hk := c.SSMKeyHeads
	r := c.SSMValueHeads / hk
	b = make([]int, 0, c.SSMValueHeads)
	a = make([]int, 0, c.SSMValueHeads)
	for g := range hk {
		b = identity(r, g*2*r, b)
		a = identity(r, g*2*r+r, a)
	}
	return b, a
}
