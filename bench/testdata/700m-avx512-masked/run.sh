#!/bin/sh
# The "AVX-512 masked" comparison: the 700M synthetic llama in Q1_0, Q8_0,
# F16 and BF16, timed by qnnprep and by llama.cpp's llama-bench side by side,
# with both engines held to AVX2 on this AVX-512 machine: qnnprep through
# GODEBUG=cpu.avx512f=off,cpu.avxvnni=off (golang.org/x/sys/cpu then
# reports neither AVX-512 nor AVX-VNNI; the report says kernels "avx2"),
# llama.cpp through --llama-cpu haswell (llama-bench is offered only
# ggml's AVX2 CPU backend; the rows say "CPU haswell"). The CPU, caches
# and memory are still this machine's: this is not an AVX2-only CPU.
# Runs before session 13 masked only cpu.avx512f: there were no AVX-VNNI
# kernels then.
#
#   sh bench/testdata/700m-avx512-masked/run.sh [OUTDIR]
#
# The environment it reads is described in ../700m-compare.sh.
set -eu
. "$(dirname "$0")/../700m-compare.sh"
compare700m "${1:-bench/testdata/700m-avx512-masked}" bench-700m-avx512-masked.png \
	cpu.avx512f=off,cpu.avxvnni=off haswell \
	'"kernels": "avx2"' '"cpu_mask": "cpu.avx512f=off,cpu.avxvnni=off"' '"backend": "CPU haswell"'
