# Sourced by the run.sh scripts beside it (from the repository root):
# compare700m times the 700M Q1_0, Q8_0, F16 and BF16 models with qnnprep and
# llama.cpp's llama-bench side by side (for each thread count llama-bench
# runs right after qnnprep), writes results.json, table.md and the plot
# into OUTDIR, and fails unless results.json says what was compared.
#
#   compare700m OUTDIR PLOT GODEBUG LLAMACPU WANT...
#
# GODEBUG is the cpu.* mask for qnnprep ("" for none), LLAMACPU the only
# ggml CPU backend llama-bench may load ("" for its own choice); each WANT
# is a string results.json must contain. QNNPREP_PEERS_DIR must point at
# the peers' node_modules (llama-bench is found beside it, or set
# QNNPREP_LLAMA_BENCH). QNNPREP_BENCH_MODELS names other model files and
# QNNPREP_BENCH_ARGS other bench sizes (default "-p 64 -n 32 -r 3 -t 1,2")
# for trying a script quickly.
. "$(dirname "$0")/../700m-models.sh"

compare700m() {
	out=$(cd "$1" && pwd)
	plot=$2
	godebug=$3
	llamacpu=$4
	shift 4
	args=${QNNPREP_BENCH_ARGS:--p 64 -n 32 -r 3 -t 1,2}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	go build -o "$tmp/qnnprep" ./cmd/qnnprep
	models=${QNNPREP_BENCH_MODELS:-$(models700m)}
	uptime
	# shellcheck disable=SC2086 # $models and $args are lists
	GODEBUG=$godebug "$tmp/qnnprep" bench $models $args \
		--llama --llama-peer llama-bench ${llamacpu:+--llama-cpu "$llamacpu"} -o json >"$out/results.json"
	uptime
	# The plot written before (committed, so no .qnnprep-outputs lists
	# it): qnnprep replaces only files it recorded writing.
	rm -f "$out/$plot"
	"$tmp/qnnprep" bench report "$out/results.json" -o table --plot "$out/$plot" >"$out/table.md"
	for want in "$@"; do
		if ! grep -q "$want" "$out/results.json"; then
			echo "run.sh: $out/results.json lacks $want" >&2
			exit 1
		fi
	done
	grep -m1 '"cpu":' "$out/results.json"
	git rev-parse --short HEAD
}
