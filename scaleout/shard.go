package scaleout

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/shard"
)

// Shard is one of Count processes sharing a build's stage jobs; Index
// counts from 0, like Kubernetes' JOB_COMPLETION_INDEX.
type Shard struct {
	Index, Count int
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ParseShard reads "I/N" (0 ≤ I < N).
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	if !ok {
		return Shard{}, fmt.Errorf("shard %q: want INDEX/COUNT, e.g. 0/4", s)
	}
	idx, err1 := strconv.Atoi(i)
	cnt, err2 := strconv.Atoi(n)
	if err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("shard %q: want INDEX/COUNT as two integers, e.g. 0/4", s)
	}
	return newShard(idx, cnt, s)
}

func newShard(idx, cnt int, from string) (Shard, error) {
	if cnt < 1 {
		return Shard{}, fmt.Errorf("shard %s: count %d, want at least 1", from, cnt)
	}
	if idx < 0 || idx >= cnt {
		return Shard{}, fmt.Errorf("shard %s: index %d, want 0 to %d (indices count from 0)", from, idx, cnt-1)
	}
	return Shard{Index: idx, Count: cnt}, nil
}

// Environment variables that carry a shard's index on the engines CI
// users run: Kubernetes Indexed Jobs and Slurm job arrays.
const (
	EnvK8sIndex   = "JOB_COMPLETION_INDEX"
	EnvSlurmIndex = "SLURM_ARRAY_TASK_ID"
	EnvSlurmMin   = "SLURM_ARRAY_TASK_MIN"
)

// ShardFromEnv is the shard given by an engine: the index from
// JOB_COMPLETION_INDEX, else SLURM_ARRAY_TASK_ID (minus
// SLURM_ARRAY_TASK_MIN, so arrays numbered from 1 work), and the count
// from the caller's flag. ok is false when neither variable is set.
func ShardFromEnv(count int) (s Shard, ok bool, err error) {
	for _, name := range []string{EnvK8sIndex, EnvSlurmIndex} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		idx, err := strconv.Atoi(v)
		if err != nil {
			return Shard{}, true, fmt.Errorf("$%s=%q: not an integer", name, v)
		}
		if name == EnvSlurmIndex {
			if m := os.Getenv(EnvSlurmMin); m != "" {
				base, err := strconv.Atoi(m)
				if err != nil {
					return Shard{}, true, fmt.Errorf("$%s=%q: not an integer", EnvSlurmMin, m)
				}
				idx -= base
			}
		}
		s, err := newShard(idx, count, "from $"+name)
		return s, true, err
	}
	return Shard{}, false, nil
}

// Owners assigns each stage of p to one of n shards, balanced by the
// stages' device bytes (what the SDK tools chew through): stages are taken
// largest first (ties: lower stage first), each going to the shard with
// the fewest bytes so far (ties: lower shard first). Every process
// computes the same assignment from the same plan. owners[s] is stage s's
// shard. n may not exceed the number of stages: a shard without a stage
// is a CI job that does nothing.
func Owners(p *shard.Plan, n int) ([]int, error) {
	if n < 1 {
		return nil, fmt.Errorf("scaleout: %d shards, want at least 1", n)
	}
	if n > len(p.Stages) {
		return nil, fmt.Errorf("scaleout: %d shards for a plan of %d stages; use at most %d", n, len(p.Stages), len(p.Stages))
	}
	order := make([]int, len(p.Stages))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p.Stages[b].Bytes, p.Stages[a].Bytes) })
	load := make([]int64, n)
	owners := make([]int, len(p.Stages))
	for _, s := range order {
		best := 0
		for k := 1; k < n; k++ {
			if load[k] < load[best] {
				best = k
			}
		}
		owners[s] = best
		load[best] += p.Stages[s].Bytes
	}
	return owners, nil
}

// Stages returns the 0-based stages shard s owns, in stage order.
func Stages(p *shard.Plan, s Shard) ([]int, error) {
	owners, err := Owners(p, s.Count)
	if err != nil {
		return nil, err
	}
	mine := []int{}
	for st, o := range owners {
		if o == s.Index {
			mine = append(mine, st)
		}
	}
	return mine, nil
}
