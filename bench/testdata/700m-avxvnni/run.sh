#!/bin/sh
# The "AVX2 + AVX-VNNI" comparison, the instruction sets of Intel's client
# CPUs since Alder Lake (no AVX-512): the 700M synthetic llama in Q1_0,
# Q8_0, F16 and BF16, timed by qnnprep and by llama.cpp's llama-bench side by
# side, qnnprep held to them through GODEBUG=cpu.avx512f=off (AVX-VNNI
# stays; the report names the kernels "avx2+avxvnni" where a package has
# such kernels), llama.cpp through --llama-cpu alderlake (ggml's AVX2 +
# AVX-VNNI backend; the rows say "CPU alderlake"). The CPU, caches and
# memory are still this AVX-512 machine's.
#
#   sh bench/testdata/700m-avxvnni/run.sh [OUTDIR]
#
# The environment it reads is described in ../700m-compare.sh.
set -eu
. "$(dirname "$0")/../700m-compare.sh"
compare700m "${1:-bench/testdata/700m-avxvnni}" bench-700m-avxvnni.png \
	cpu.avx512f=off alderlake \
	'avx2+avxvnni' '"cpu_mask": "cpu.avx512f=off"' '"backend": "CPU alderlake"'
