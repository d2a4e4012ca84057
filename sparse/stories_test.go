package sparse_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/runtime"
	"github.com/qnnprep/qnnprep/sparse"
	"github.com/qnnprep/qnnprep/testkit"
)

func openStories(t testing.TB) *model.Model {
	t.Helper()
	m, err := model.Open(testkit.Stories(t, "stories260K-llamacpp.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// storiesCalibration is BOS and the first 64 greedy ids of the fixture:
// real text the model writes.
func storiesCalibration(t testing.TB) [][]int32 {
	b, err := os.ReadFile(testkit.Stories(t, "greedy_ids_from_bos_first64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{1}
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int32(v))
	}
	return [][]int32{ids}
}

// calibrate records activation norms of m over seqs through the runtime.
func calibrate(t testing.TB, m *model.Model, seqs [][]int32) sparse.Activations {
	t.Helper()
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := sparse.NewActivationRecorder()
	stop := e.Observe(rec.Observe)
	defer stop()
	for _, s := range seqs {
		if _, err := e.Logits(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	a, err := rec.Activations()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// evalSet is the dense model's greedy continuations of prompts that are
// not the calibration text: sequences and the dense model's argmax at
// each position.
type evalSet struct {
	seqs [][]int32
}

func newEvalSet(t testing.TB, m *model.Model) evalSet {
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	var es evalSet
	for _, p := range [][]int32{{1, 297}, {1, 331, 270}, {1, 460}, {1, 284, 312}, {1, 359}, {1, 412, 265}} {
		out, err := e.Greedy(context.Background(), p, 48)
		if err != nil {
			t.Fatal(err)
		}
		es.seqs = append(es.seqs, append(append([]int32(nil), p...), out...))
	}
	return es
}

// top1 is the teacher-forced top-1 agreement of m with the dense model's
// greedy tokens over the generated part of each sequence.
func (es evalSet) top1(t testing.TB, m *model.Model) float64 {
	e, err := runtime.New(m, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	agree, n := 0, 0
	for _, s := range es.seqs {
		rows, err := e.Logits(context.Background(), s[:len(s)-1])
		if err != nil {
			t.Fatal(err)
		}
		for i := 2; i < len(rows); i++ { // predictions of generated tokens
			if runtime.Argmax(rows[i]) == s[i+1] {
				agree++
			}
			n++
		}
	}
	return float64(agree) / float64(n)
}

// TestStoriesWandaNotWorse: at 50% 2:4, activation-aware selection keeps
// at least the top-1 agreement magnitude selection keeps, on text that is
// not the calibration text.
func TestStoriesWandaNotWorse(t *testing.T) {
	m := openStories(t)
	es := newEvalSet(t, m)
	if d := es.top1(t, m); d != 1 {
		t.Fatalf("dense model agrees with itself only %.3f", d)
	}
	acts := calibrate(t, m, storiesCalibration(t))
	p := mustPattern(t, "2:4")
	mag := apply(t, m, sparse.Options{Pattern: p})
	wan := apply(t, m, sparse.Options{Pattern: p, Method: sparse.Wanda, Activations: acts})
	if mag.Report.Sparsity != 0.5 || wan.Report.Sparsity != 0.5 {
		t.Fatalf("sparsity %v / %v", mag.Report.Sparsity, wan.Report.Sparsity)
	}
	tm, tw := es.top1(t, mag.Model), es.top1(t, wan.Model)
	t.Logf("2:4 top-1 agreement: magnitude %.3f, wanda %.3f", tm, tw)
	if tw < tm {
		t.Errorf("wanda %.3f < magnitude %.3f", tw, tm)
	}
	if tm >= 1 {
		t.Errorf("2:4 magnitude pruning left the model unchanged (top-1 %.3f)", tm)
	}
}

// TestStoriesQualityFalls: the quality cost rises with sparsity along the
// N:4 family and along channel sparsity.
func TestStoriesQualityFalls(t *testing.T) {
	m := openStories(t)
	es := newEvalSet(t, m)
	for _, curve := range [][]sparse.Options{
		{{Pattern: mustPattern(t, "3:4")}, {Pattern: mustPattern(t, "2:4")}, {Pattern: mustPattern(t, "1:4")}},
		{{Pattern: mustPattern(t, "channel"), Sparsity: 0.125}, {Pattern: mustPattern(t, "channel"), Sparsity: 0.25}, {Pattern: mustPattern(t, "channel"), Sparsity: 0.5}},
	} {
		prev := 1.0
		for _, opt := range curve {
			v := apply(t, m, opt)
			a := es.top1(t, v.Model)
			t.Logf("%s %.3f: top-1 %.3f", opt.Pattern, v.Report.Sparsity, a)
			if a > prev {
				t.Errorf("%s at %.3f: top-1 %.3f above %.3f at lower sparsity", opt.Pattern, v.Report.Sparsity, a, prev)
			}
			prev = a
		}
	}
}
