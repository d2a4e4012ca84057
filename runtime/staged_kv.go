package runtime

import (
	"fmt"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

// The KV manager follows Genie's (qnn-genie.md §1.3): a call processes
// n_process rows on one (AR, CL) variant; afterwards the rows a selection
// mask of exactly n_process entries (or none: all) marks are copied in
// order from past_*_out into past_*_in after the n_valid_kv entries held.
// On an AR-c variant (CL == AR, no past inputs) every call re-processes
// the whole token history, so n_process = new + n_past.

// Reset empties the sequence, keeping the variants' buffers.
func (s *Staged) Reset() {
	s.history = s.history[:0]
	s.nValid = 0
	s.step = nil
	s.feat.pending = nil
	s.eaglet.pending = nil
	if s.kv != nil {
		for _, v := range s.vars {
			if v != s.kv {
				v.release()
			}
		}
		for _, b := range s.kv.bufs {
			clear(b.f)
			clear(b.i)
		}
	}
	clear(s.calls)
}

// Len is the number of committed tokens (Genie's n_past).
func (s *Staged) Len() int { return len(s.history) }

// History returns the committed tokens (Genie's token history). The slice
// aliases the Staged.
func (s *Staged) History() []int32 { return s.history }

// ValidKV is n_valid_kv: the cache entries held in the current KV
// variant's past_*_in tensors.
func (s *Staged) ValidKV() int { return s.nValid }

// StagedCalls counts the calls made on one variant since Reset.
type StagedCalls struct {
	AR, CL int
	Calls  int
}

// Calls lists the graph calls per variant since Reset (every call runs
// each stage once), in Genie's preference order (CL, then AR).
func (s *Staged) Calls() []StagedCalls {
	var out []StagedCalls
	for _, v := range s.vars {
		if n := s.calls[[2]int{v.ar, v.cl}]; n > 0 {
			out = append(out, StagedCalls{v.ar, v.cl, n})
		}
	}
	return out
}

// Surface returns the current buffer of I/O tensor name on variant (ar,
// cl), or nil if that variant holds no buffers now. It aliases the
// Staged: read it between calls (tests compare it with State.KV and
// State.DeltaNet).
func (s *Staged) Surface(ar, cl int, name string) []float32 {
	for _, v := range s.vars {
		if v.ar == ar && v.cl == cl && v.bufs != nil {
			if b := v.bufs[name]; b != nil {
				return b.f
			}
		}
	}
	return nil
}

// choose picks the variant for the next call the way Genie's strategy
// does: the smallest CL that holds all the tokens, then the smallest AR
// that takes them in one call, else the largest AR whose chunk fits (the
// tokens then go in chunks). pending is what a KV variant must process
// (history not yet in the cache, then new tokens), total what an AR-c
// variant must (all history and new tokens); one requires a single call.
// It returns the variant and the rows of the call.
func (s *Staged) choose(pending, total int, one bool) (*stagedVariant, int, error) {
	var pick *stagedVariant
	rows := 0
	for i := 0; i < len(s.vars) && pick == nil; {
		j := i
		for j < len(s.vars) && s.vars[j].cl == s.vars[i].cl {
			j++
		}
		group := s.vars[i:j]
		i = j
		holds := false
		for _, v := range group {
			if v.arc {
				holds = holds || total <= v.ar
			} else {
				holds = holds || s.nValid+pending <= v.cl-v.ar
			}
		}
		if !holds {
			continue
		}
		for _, v := range group { // AR ascending
			need := pending
			if v.arc {
				need = total
			}
			n := min(need, v.ar)
			switch {
			case (v.arc || one) && need > v.ar:
				continue
			case !v.arc && s.nValid+n > v.cl-v.ar:
				continue // the cache would not hold the accepted rows
			}
			// Smallest AR taking everything; failing that, the largest.
			if pick == nil || (rows < need && n > rows) {
				pick, rows = v, n
			}
		}
	}
	if pick == nil {
		var kvMax, arcMax *stagedVariant
		for _, v := range s.vars {
			switch {
			case v.arc && (arcMax == nil || v.ar > arcMax.ar):
				arcMax = v
			case !v.arc && (kvMax == nil || v.cl-v.ar > kvMax.cl-kvMax.ar):
				kvMax = v
			}
		}
		var why []string
		if kvMax != nil {
			why = append(why, fmt.Sprintf("the largest cache, CL %d on AR %d, keeps %d entries", kvMax.cl, kvMax.ar, kvMax.cl-kvMax.ar))
		}
		if arcMax != nil {
			why = append(why, fmt.Sprintf("the largest AR-c graph re-processes %d tokens", arcMax.ar))
		}
		if one {
			why = append(why, "and a step must fit one call")
		}
		return nil, 0, fmt.Errorf("runtime: staged: plan %s: %d tokens (%d committed + %d new) do not fit any variant: %s",
			s.p.Model.Name, total, len(s.history), total-len(s.history), strings.Join(why, "; "))
	}
	return pick, rows, nil
}

// use makes v the variant of the next call, moving the cache into v's
// past_*_in tensors when v is a KV variant other than the current one
// (Genie moves the KV on a CL switch, §1.2).
func (s *Staged) use(v *stagedVariant) {
	s.buffers(v)
	if v.arc || v == s.kv {
		return
	}
	old := s.kv
	s.kv = v
	if old == nil {
		return
	}
	c := &s.e.cfg
	nkv, d := c.KVHeads, c.HeadDim
	op, np := old.cl-old.ar, v.cl-v.ar
	for l, kind := range c.LayerKinds {
		if kind == model.DeltaNet {
			copy(v.f(s.names[l].convIn), old.f(s.names[l].convIn))
			copy(v.f(s.names[l].ssmIn), old.f(s.names[l].ssmIn))
			continue
		}
		ok, nk := old.f(s.names[l].keyIn), v.f(s.names[l].keyIn)
		ov, nv := old.f(s.names[l].valueIn), v.f(s.names[l].valueIn)
		for h := 0; h < nkv; h++ {
			for i := 0; i < d; i++ {
				copy(nk[(h*d+i)*np:(h*d+i)*np+s.nValid], ok[(h*d+i)*op:(h*d+i)*op+s.nValid])
			}
			copy(nv[h*np*d:(h*np+s.nValid)*d], ov[h*op*d:(h*op+s.nValid)*d])
		}
	}
	old.release()
}

// process runs one call of rows tokens on v: parent gives each row's
// parent row (−1: it follows the visible cache), reproc the leading rows
// that re-process committed history, minAccept the fewest rows Commit may
// keep (DeltaNet snapshots are kept for the rollback to it).
func (s *Staged) process(v *stagedVariant, tokens []int32, parent []int, reproc, minAccept int) (*stagedStep, error) {
	if len(tokens) == 0 || len(tokens) > v.ar {
		return nil, fmt.Errorf("runtime: staged: %d rows for a call of AR %d", len(tokens), v.ar)
	}
	s.use(v)
	base := 0
	if !v.arc {
		base = s.nValid
	}
	pos := make([]int32, len(tokens))
	for r, p := range parent {
		if p >= r {
			return nil, fmt.Errorf("runtime: staged: row %d has parent %d: parents must come first", r, p)
		}
		pos[r] = int32(base)
		if p >= 0 {
			pos[r] = pos[p] + 1
		}
	}
	if s.e.cfg.Hybrid() {
		keep := 0 // a call whose rows all stay needs no snapshot
		if minAccept < v.ar {
			keep = v.ar - max(minAccept, 1) + 1
		}
		s.st.SetRollback(keep)
	}
	s.fill(v, tokens, parent, pos, base)
	logits, err := s.call(v, len(tokens))
	if err != nil {
		return nil, err
	}
	st := &stagedStep{v: v, tokens: tokens, parent: parent, reproc: reproc, base: base, logits: logits, feats: s.callFeatures(len(tokens)), hidden: s.callHidden(v, len(tokens))}
	s.step = st
	return st, nil
}

// callRows chooses the variant for tokens after the committed sequence
// (for all of them in one call when one) and lays out the call's rows:
// the history it processes again (from the first row missing from the
// KV, or all of it on an AR-c variant; reproc rows), then tokens. n is
// how many rows the variant takes.
func (s *Staged) callRows(tokens []int32, one bool) (v *stagedVariant, rows []int32, reproc, n int, err error) {
	total := len(s.history) + len(tokens)
	v, n, err = s.choose(len(s.history)-s.nValid+len(tokens), total, one)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	from := s.nValid
	if v.arc {
		from = 0
	}
	return v, append(slices.Clone(s.history[from:]), tokens...), len(s.history) - from, n, nil
}

// call runs every stage graph of v over the rows fill laid out, counts
// the call, and returns the logits of its first n rows, each copied out
// of the variant's buffer.
func (s *Staged) call(v *stagedVariant, n int) ([][]float32, error) {
	for k := range v.graphs {
		if err := s.runStage(v, k); err != nil {
			return nil, err
		}
	}
	s.calls[[2]int{v.ar, v.cl}]++
	vocab := s.e.cfg.VocabSize
	lg := v.f(shard.Logits)
	logits := make([][]float32, n)
	for r := range logits {
		logits[r] = slices.Clone(lg[r*vocab : (r+1)*vocab])
	}
	return logits, nil
}

// Commit accepts the rows of the last Submit that selection marks, as
// Genie's updateKV does: the mask must be empty (all rows) or have exactly
// n_process entries, one per row of the call, re-processed history
// included. Selected rows must form one path from the committed sequence
// (history rows always selected); on models with Gated DeltaNet layers
// they must be the call's leading rows.
func (s *Staged) Commit(selection []bool) error {
	st := s.step
	if st == nil {
		return fmt.Errorf("runtime: staged: commit without a processed step")
	}
	n := len(st.tokens)
	if len(selection) != 0 && len(selection) != n {
		// Genie's own words (kvmanager.cpp processUpdate, qnn-genie.md §0).
		return fmt.Errorf("runtime: staged: Invalid selection mask size. Found %d but expected 0 or %d (n_process = %d new + %d re-processed history on AR %d CL %d)",
			len(selection), n, n-st.reproc, st.reproc, st.v.ar, st.v.cl)
	}
	sel := selection
	if len(sel) == 0 {
		sel = make([]bool, n)
		for i := range sel {
			sel[i] = true
		}
	}
	prev, count, prefix := -1, 0, true
	for r, ok := range sel {
		if !ok {
			if r < st.reproc {
				return fmt.Errorf("runtime: staged: selection drops row %d, which re-processes committed token %d", r, r)
			}
			continue
		}
		if st.parent[r] != prev {
			return fmt.Errorf("runtime: staged: selection is not a path: row %d's parent %d is not the previous selected row %d", r, st.parent[r], prev)
		}
		prefix = prefix && r == count
		prev = r
		count++
	}
	c := &s.e.cfg
	if c.Hybrid() && !prefix {
		return fmt.Errorf("runtime: staged: Gated DeltaNet state can keep only the leading rows of a call, not a branch of a draft tree (%s)", shard.RuleGDNSpec)
	}
	v := st.v
	if !v.arc {
		nkv, d := c.KVHeads, c.HeadDim
		past := v.cl - v.ar
		for l, kind := range c.LayerKinds {
			if kind == model.DeltaNet {
				if err := s.commitGDN(v, l, count); err != nil {
					return err
				}
				continue
			}
			ki, ko := v.f(s.names[l].keyIn), v.f(s.names[l].keyOut)
			vi, vo := v.f(s.names[l].valueIn), v.f(s.names[l].valueOut)
			j := s.nValid
			for r, ok := range sel {
				if !ok {
					continue
				}
				for h := 0; h < nkv; h++ {
					for i := 0; i < d; i++ {
						ki[(h*d+i)*past+j] = ko[(h*d+i)*v.ar+r]
					}
					copy(vi[(h*past+j)*d:(h*past+j+1)*d], vo[(h*v.ar+r)*d:(h*v.ar+r+1)*d])
				}
				j++
			}
		}
		s.nValid += count
	}
	for r := st.reproc; r < n; r++ {
		if sel[r] {
			s.history = append(s.history, st.tokens[r])
			if st.feats != nil {
				s.feat.pending = append(s.feat.pending, st.feats[r])
			}
			if st.hidden != nil {
				s.eaglet.pending = append(s.eaglet.pending, st.hidden[r])
			}
		}
	}
	s.step = nil
	return nil
}

// commitGDN sets DeltaNet layer l's past_conv/ssm_in to its state after
// the call's first a rows: _out when the call had no other rows, else the
// runtime's snapshot.
func (s *Staged) commitGDN(v *stagedVariant, l, a int) error {
	c := &s.e.cfg
	ci, si := v.f(s.names[l].convIn), v.f(s.names[l].ssmIn)
	switch {
	case a == 0:
	case a == v.ar:
		copy(ci, v.f(s.names[l].convOut))
		copy(si, v.f(s.names[l].ssmOut))
	default:
		sn := s.st.layers[l].snap(a)
		if sn == nil {
			return fmt.Errorf("runtime: staged: DeltaNet layer %d: no state after row %d of the call (fewer rows accepted than the step allowed)", l, a)
		}
		convToPlan(ci, sn.conv, c)
		copy(si, sn.ssm)
	}
	return nil
}

// Submit processes tokens after the committed sequence in one call, as a
// speculative step does, and returns each token's logits row. parents[i]
// is the index in tokens of token i's parent in a draft tree, −1 for a
// token that follows the committed sequence; nil means a chain. The call
// runs on the variant Genie would pick for all its rows; call Commit next.
// On an AR-c variant the rows are the whole history and then tokens, so
// Commit's mask needs len(history) + len(tokens) entries.
func (s *Staged) Submit(tokens []int32, parents []int) ([][]float32, error) {
	if s.step != nil {
		return nil, fmt.Errorf("runtime: staged: the previous step is not committed")
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("runtime: no tokens to process")
	}
	if parents != nil && len(parents) != len(tokens) {
		return nil, fmt.Errorf("runtime: staged: %d parents for %d tokens", len(parents), len(tokens))
	}
	for _, t := range tokens {
		if err := s.e.checkToken(t); err != nil {
			return nil, err
		}
	}
	v, rows, reproc, _, err := s.callRows(tokens, true)
	if err != nil {
		return nil, err
	}
	parent := make([]int, len(rows))
	for r := range parent {
		parent[r] = r - 1
	}
	for i := range tokens {
		p := i - 1
		if parents != nil {
			p = parents[i]
			if p < -1 || p >= i {
				return nil, fmt.Errorf("runtime: staged: token %d has parent %d: want −1 or an earlier token", i, p)
			}
		}
		if p < 0 {
			parent[reproc+i] = reproc - 1
		} else {
			parent[reproc+i] = reproc + p
		}
	}
	st, err := s.process(v, rows, parent, reproc, reproc+1)
	if err != nil {
		return nil, err
	}
	return st.logits[reproc:], nil
}

// Truncate rewinds the sequence to its first n tokens, as a dialog does
// when it rewinds n_past: cache entries beyond n stop being valid
// (n_valid_kv = min(n_valid_kv, n)) and are overwritten by later calls.
// Recurrent state cannot be rewound this way (Genie carries none, §0.5;
// rejected draft rows are rolled back at Commit instead), so on models
// with Gated DeltaNet layers n must be 0 or Len().
func (s *Staged) Truncate(n int) error {
	switch {
	case s.step != nil:
		return fmt.Errorf("runtime: staged: truncate with an uncommitted step")
	case n < 0 || n > len(s.history):
		return fmt.Errorf("runtime: staged: truncate to %d tokens, the sequence holds %d", n, len(s.history))
	case n == len(s.history):
		return nil
	case n > 0 && s.e.cfg.Hybrid():
		return fmt.Errorf("runtime: staged: cannot rewind Gated DeltaNet state from %d to %d tokens (only to 0)", len(s.history), n)
	}
	drop := len(s.history) - n
	s.history = s.history[:n]
	s.nValid = min(s.nValid, n)
	s.feat.pending = s.feat.pending[:max(0, len(s.feat.pending)-drop)]
	if n == 0 && s.kv != nil {
		for l, kind := range s.e.cfg.LayerKinds {
			if kind == model.DeltaNet {
				clear(s.kv.f(s.names[l].convIn))
				clear(s.kv.f(s.names[l].ssmIn))
			}
		}
	}
	return nil
}
