#!/bin/sh
# Reproduces this directory: the 700M synthetic llama in Q1_0, Q8_0,
# F16 and BF16, timed by qnnprep and by llama.cpp's llama-bench side by side, each
# with the best kernels this AVX-512 CPU runs (llama.cpp picks its own
# backend: zen4 on the EPYC, icelake or sapphirerapids on Intel). Run it
# from the repository root on an otherwise idle machine; it takes a few
# minutes.
#
#   sh bench/testdata/700m-avx512/run.sh [OUTDIR]
#
# The environment it reads is described in ../700m-compare.sh.
set -eu
. "$(dirname "$0")/../700m-compare.sh"
compare700m "${1:-bench/testdata/700m-avx512}" bench-700m-avx512.png "" "" \
	'"kernels": "avx512'
