# Sourced by the run.sh scripts beside it (from the repository root):
# models700m prints the paths of the 700M Q1_0, Q8_0, F16 and BF16 models in
# $QNNPREP_BENCH_CACHE (default $TMPDIR/qnnprep-bench), writing them there
# once when missing (TestWrite700M; its output goes to stderr).
models700m() {
	cache=${QNNPREP_BENCH_CACHE:-${TMPDIR:-/tmp}/qnnprep-bench}
	if ! [ -f "$cache/llama700m-Q1_0.gguf" ] || ! [ -f "$cache/llama700m-Q8_0.gguf" ] ||
		! [ -f "$cache/llama700m-F16.gguf" ] || ! [ -f "$cache/llama700m-BF16.gguf" ]; then
		mkdir -p "$cache"
		QNNPREP_BENCH_700M=1 QNNPREP_BENCH_CACHE="$cache" go test -count=1 -timeout 60m -run 'TestWrite700M$' ./bench >&2
	fi
	echo "$cache/llama700m-Q1_0.gguf $cache/llama700m-Q8_0.gguf $cache/llama700m-F16.gguf $cache/llama700m-BF16.gguf"
}
