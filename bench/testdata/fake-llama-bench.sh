#!/bin/sh
# A stand-in for llama.cpp's llama-bench that never times anything, for
# the tests of what bench does when its peer fails: it answers --help
# (the installation check), then, as QNNPREP_FAKE_LLAMA_BENCH says, hangs
# ("hang") or fails with a message on stderr (anything else). Each timing
# run appends a line to $QNNPREP_FAKE_LLAMA_BENCH_LOG when that is set.
case "$1" in
--help) echo "usage: llama-bench [options]"; exit 0 ;;
esac
if [ -n "${QNNPREP_FAKE_LLAMA_BENCH_LOG:-}" ]; then
	echo "$*" >>"$QNNPREP_FAKE_LLAMA_BENCH_LOG"
fi
if [ "${QNNPREP_FAKE_LLAMA_BENCH:-}" = hang ]; then
	exec sleep 60
fi
echo "error: failed to load model (fake llama-bench)" >&2
exit 3
