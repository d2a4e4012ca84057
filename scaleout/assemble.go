package scaleout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/qnnprep/qnnprep/qnnpack"
)

// BuildShard builds the stages shard s owns (Stages) into o.WorkDir and
// o.Cache, and writes no bundle. It returns those stages.
func BuildShard(ctx context.Context, o qnnpack.BuildOptions, s Shard) (*qnnpack.Result, []int, error) {
	if o.Cache == nil {
		return nil, nil, errors.New("scaleout: a shard needs a cache shared with the assemble step (--cache)")
	}
	mine, err := Stages(o.Plan, s)
	if err != nil {
		return nil, nil, err
	}
	o.Stages = mine
	res, err := qnnpack.Build(ctx, o)
	return res, mine, err
}

// MissingError is an assemble that found stages neither built locally nor
// in the cache; it names each and, when the shard count is known, the
// shard that owns it.
type MissingError struct {
	Stages []int // 0-based
	Owners []int // Owners[i] is Stages[i]'s shard; nil when unknown
	Count  int
	Names  []string // context binary names
}

func (e *MissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scaleout: the cache lacks %d stage(s); rerun the shard(s) that own them, then assemble again:", len(e.Stages))
	for i, s := range e.Stages {
		fmt.Fprintf(&b, "\n  stage %d (%s)", s+1, e.Names[i])
		if e.Owners != nil {
			fmt.Fprintf(&b, ": shard %d/%d (--shard %d/%d)", e.Owners[i], e.Count, e.Owners[i], e.Count)
		}
	}
	return b.String()
}

// Assemble writes o's bundle from o.Cache without running a tool: every
// stage must have been built by a shard (or be up to date in o.WorkDir).
// shards is the count the shards ran with (0 if unknown); a
// *MissingError then names each missing stage's owner.
func Assemble(ctx context.Context, o qnnpack.BuildOptions, shards int) (*qnnpack.Result, error) {
	if o.Cache == nil {
		return nil, errors.New("scaleout: assemble needs the cache the shards wrote (--cache)")
	}
	o.NoRun = true
	o.Stages = nil
	res, err := qnnpack.Build(ctx, o)
	var miss *qnnpack.MissingError
	if !errors.As(err, &miss) {
		return res, err
	}
	e := &MissingError{Stages: miss.Stages(), Count: shards}
	for _, s := range e.Stages {
		e.Names = append(e.Names, qnnpack.ContextBinaryName(o.Plan, s))
	}
	if shards > 0 {
		owners, err := Owners(o.Plan, shards)
		if err != nil {
			return res, err
		}
		for _, s := range e.Stages {
			e.Owners = append(e.Owners, owners[s])
		}
	}
	return res, e
}

// OpenCache opens the cache a --cache flag names: oci://HOST/REPO for an
// OCI registry (OCICache), anything else a directory (DirCache).
func OpenCache(spec string) (qnnpack.Cache, error) {
	if spec == "" {
		return nil, nil
	}
	if ref, ok := strings.CutPrefix(spec, "oci://"); ok {
		return NewOCICache(ref)
	}
	return &DirCache{Dir: spec}, nil
}
