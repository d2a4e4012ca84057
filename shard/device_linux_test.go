package shard

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/mmapfile"
	"github.com/qnnprep/qnnprep/model"
)

// TestWeightLayoutPerBlockLeavesMappingAlone: a per-block Q8_0 tensor is
// told by its first row, read with pread. A fault in the mapping instead
// makes the kernel read around it (read_ahead_kb, megabytes), which for a
// per-block model reads most of the file just to size it. No page of the
// tensor may be mapped in after sizing (pagemap bit 63, "present").
func TestWeightLayoutPerBlockLeavesMappingAlone(t *testing.T) {
	const rows, cols = 256, 2048 // 64 blocks of 34 bytes a row, 136 pages in all
	src := q8Tensor(rows, cols, func(r, b int) float32 { return float32(r + b + 1) })
	data, err := src.Data()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "perblock.gguf")
	require.NoError(t, gguf.WriteFile(path, &gguf.Writer{Alignment: 4096, Tensors: []gguf.WriterTensor{
		{Name: "w", Dims: src.Dims, Type: gguf.Q8_0, Data: gguf.Bytes(data)},
	}}))
	f, err := gguf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	ti, ok := f.Tensor("w")
	require.True(t, ok)
	mapped, err := f.Data(ti)
	require.NoError(t, err)
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Skip(err)
	}
	defer pm.Close()
	page := uintptr(os.Getpagesize())
	lo := uintptr(unsafe.Pointer(&mapped[0]))
	require.Zero(t, lo%page, "tensor data not page-aligned")
	present := func() int {
		n := 0
		buf := make([]byte, 8)
		for a := lo; a < lo+uintptr(len(mapped)); a += page {
			_, err := pm.ReadAt(buf, int64(a/page*8))
			require.NoError(t, err)
			if buf[7]&0x80 != 0 {
				n++
			}
		}
		return n
	}
	mmapfile.Release(mapped) // reading the header mapped some in
	require.Zero(t, present(), "tensor pages mapped in before sizing")

	l, err := WeightLayout(model.NewTensor("w", src.Dims, gguf.Q8_0, mapped), Container4Bit)
	require.NoError(t, err)
	assert.Equal(t, Layout{Bits: 8, Integer: true, BlockSize: 32, Scales: rows * cols / 32}, l)
	assert.Zero(t, present(), "pages of the tensor faulted in by sizing")
}
