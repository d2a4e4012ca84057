package quantize

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestMappedMatchesStreamed checks that the mapped pipeline writes the
// same bytes and reports the same figures as the streaming one, for every
// built-in recipe and several worker counts: with the default chunks (one
// per tensor of this small model) and with chunks of 2 KiB read in pieces
// of 512 bytes, where neighbouring chunks are hashed as pairs.
func TestMappedMatchesStreamed(t *testing.T) {
	t.Run("default chunks", testMappedMatchesStreamed)
	defer func(c, p int64) { chunkBytes, pieceBytes = c, p }(chunkBytes, pieceBytes)
	chunkBytes, pieceBytes = 2048, 512
	t.Run("small chunks", testMappedMatchesStreamed)
}

func testMappedMatchesStreamed(t *testing.T) {
	m := openStories(t)
	dir := t.TempDir()
	permuted := 0
	for _, tn := range m.Tensors {
		if _, _, ok := tn.PermutedRows(); ok {
			permuted++
		}
	}
	if permuted == 0 {
		t.Fatal("no tensor with permuted rows: the in-place row path goes untested")
	}
	defer func() { mapOutput = true }()
	for name, r := range Recipes {
		var want []byte
		var wantRep []byte
		for _, c := range []struct {
			mapped  bool
			workers int
		}{{false, 1}, {true, 1}, {true, 2}, {true, 3}} {
			mapOutput = c.mapped
			out := filepath.Join(dir, name+".gguf")
			rep, err := Run(context.Background(), m, out, Options{Recipe: r, Workers: c.workers})
			if err != nil {
				t.Fatalf("%s mapped=%v workers=%d: %v", name, c.mapped, c.workers, err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			rep.Seconds = 0
			gotRep, _ := json.Marshal(rep)
			if want == nil {
				want, wantRep = got, gotRep
				continue
			}
			if string(got) != string(want) {
				t.Errorf("%s mapped=%v workers=%d: bytes differ from the streamed output", name, c.mapped, c.workers)
			}
			if string(gotRep) != string(wantRep) {
				t.Errorf("%s mapped=%v workers=%d: report differs\n got %s\nwant %s", name, c.mapped, c.workers, gotRep, wantRep)
			}
		}
	}
}
