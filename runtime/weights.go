package runtime

import "unsafe"

// hugeAlign is the size of a transparent huge page on amd64 and arm64
// Linux.
const hugeAlign = 2 << 20

// placeWeights copies every weight matrix into one block of memory that
// the kernel may back with transparent huge pages. Decoding streams all
// weights once per token, and with 4 KiB pages the address translations
// (two-level on a virtual machine) stall the stream: on the 2-core test VM
// a plain AVX2 read of 1 GiB runs at 10 GB/s per core on 4 KiB pages and
// 16 GB/s on huge pages. It does nothing where huge pages are unavailable
// or when the weights exceed half the memory available.
func (e *Engine) placeWeights() {
	if !hugePagesAvailable() {
		return
	}
	var mats []*matrix
	seen := map[*matrix]bool{}
	add := func(ms ...*matrix) {
		for _, m := range ms {
			if m != nil && !seen[m] && len(m.data) > 0 {
				seen[m] = true
				mats = append(mats, m)
			}
		}
	}
	add(e.embd, e.out)
	for i := range e.layers {
		l := &e.layers[i]
		add(l.wq, l.wk, l.wv, l.wo, l.wqkv, l.wz, l.wqkvz, l.wba, l.wbeta, l.walpha, l.wssmOut, l.wgate, l.wup, l.wdown)
	}
	total := 0
	for _, m := range mats {
		total += (len(m.data) + 63) &^ 63 // each matrix 64-byte aligned
	}
	if total < hugeAlign || uint64(total) > availableMemory()/2 {
		return // too small to need it, or too large to copy safely
	}
	buf := make([]uint64, (total+hugeAlign)/8)
	base := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	off := int(-uintptr(unsafe.Pointer(&base[0])) & (hugeAlign - 1))
	block := base[off : off+total]
	adviseHuge(block, false)
	p := 0
	for _, m := range mats {
		n := len(m.data)
		copy(block[p:p+n], m.data)
		m.data = block[p : p+n : p+n]
		p += (n + 63) &^ 63
	}
	adviseHuge(block, true)
}
