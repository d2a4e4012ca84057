#!/bin/sh
# #22 item 7, "a bench run before and after shows the same speed within
# noise": builds qnnprep at the commit before #22's work began (f417eca,
# the parent of 927eae4, its first commit: synth out of internal/) and at
# HEAD, and runs the same `qnnprep bench` with both, interleaved (rounds
# alternate which binary goes first), on stories260K and the 700M models.
# The old binary has only AVX2 kernels, so the new one runs with
# GODEBUG=cpu.avx512f=off (its report says kernels avx2). It prints, per
# model, test and thread count, the new/old ratio of the mean tokens/s
# over all rounds and the range of the per-round ratios.
#
# Run it from the repository root on an otherwise idle machine:
#
#   sh bench/testdata/redesign/run.sh [OUTDIR]
#
# about 20-30 minutes with the defaults on an idle 2-core machine
# (3 rounds x 2 binaries x 4 models, -p 64 -n 32 -r 3 -t 1,2). OUTDIR
# (default: a temporary directory, kept) receives every JSON report and
# ratios.txt. Environment: QNNPREP_BENCH_CACHE, the directory holding the
# 700M models (written once when missing; default $TMPDIR/qnnprep-bench;
# /work/benchplot-models holds them); BEFORE and AFTER, the commits
# (default f417eca and HEAD); ROUNDS (default 3); QNNPREP_BENCH_MODELS and
# QNNPREP_BENCH_ARGS to try the script on other models and sizes.
set -eu
root=$(pwd)
before=${BEFORE:-f417eca}
after=${AFTER:-HEAD}
rounds=${ROUNDS:-3}
args=${QNNPREP_BENCH_ARGS:--p 64 -n 32 -r 3 -t 1,2}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/qnnprep-redesign.XXXXXX")}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each binary from a clean export of its commit (no worktree, nothing
# checked out here).
for which in old new; do
	commit=$before
	[ "$which" = new ] && commit=$after
	mkdir -p "$tmp/$which"
	git -C "$root" archive "$commit" | tar -x -C "$tmp/$which"
	(cd "$tmp/$which" && go build -o "$tmp/qnnprep-$which" ./cmd/qnnprep)
	echo "$which: $(git -C "$root" rev-parse --short "$commit")" | tee -a "$out/commits.txt"
done

. "$root/bench/testdata/700m-models.sh"
if [ -n "${QNNPREP_BENCH_MODELS:-}" ]; then
	models=$QNNPREP_BENCH_MODELS
else
	models="$root/testdata/stories260K/stories260K-llamacpp.gguf $(models700m)"
fi

bench() { # which round model
	name=$(basename "$3" .gguf)
	# shellcheck disable=SC2086 # $args is a list
	if [ "$1" = new ]; then
		GODEBUG=cpu.avx512f=off "$tmp/qnnprep-new" bench "$3" $args --read-probe 0 -q -o json >"$out/$name.new.$2.json"
	else
		"$tmp/qnnprep-old" bench "$3" $args -q -o json >"$out/$name.old.$2.json"
	fi
}

uptime | tee -a "$out/uptime.txt"
round=1
while [ "$round" -le "$rounds" ]; do
	for m in $models; do
		if [ $((round % 2)) = 1 ]; then
			bench old "$round" "$m"
			bench new "$round" "$m"
		else
			bench new "$round" "$m"
			bench old "$round" "$m"
		fi
		echo "round $round: $(basename "$m") done"
	done
	uptime | tee -a "$out/uptime.txt"
	round=$((round + 1))
done

/usr/bin/python3 - "$out" <<'PY' | tee "$out/ratios.txt"
import glob, json, os, sys
from collections import defaultdict
out = sys.argv[1]
runs = defaultdict(lambda: defaultdict(dict))  # (model, test, threads) -> which -> round -> t/s
kernels = defaultdict(set)
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    model, which, rnd, _ = os.path.basename(f).rsplit(".", 3)
    for rep in json.load(open(f))["reports"]:
        kernels[which].add(rep["machine"]["kernels"])
        for r in rep["results"]:
            if r["engine"] == "qnnprep" and r.get("sane") is not False:
                runs[(model, r["test"], r["threads"], r["depth"])][which][rnd] = r["tokens_per_s"]
print("kernels: old %s, new %s" % (", ".join(sorted(kernels["old"])), ", ".join(sorted(kernels["new"]))))
print("| model | test | threads | depth | old t/s | new t/s | new/old | per-round new/old |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
for key in sorted(runs):
    old, new = runs[key]["old"], runs[key]["new"]
    if not old or not new:
        continue
    mo, mn = sum(old.values()) / len(old), sum(new.values()) / len(new)
    per = [new[r] / old[r] for r in sorted(old) if r in new and old[r] > 0]
    print("| %s | %s | %d | %d | %.2f | %.2f | %.3f | %s |" % (key + (mo, mn, mn / mo, ", ".join("%.2f" % p for p in per))))
PY
echo "reports in $out"
