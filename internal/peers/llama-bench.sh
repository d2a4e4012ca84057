#!/usr/bin/env bash
# Builds llama.cpp's llama-bench from the installed npm package
# node-llama-cpp: the package ships llama.cpp's source as a git bundle
# (node-llama-cpp/llama/gitRelease.bundle, extracted by llama-src.sh) and
# its prebuilt CPU libraries (@node-llama-cpp/linux-x64/bins/linux-x64/*.so).
# Only llama-bench's two source files are compiled, with g++ (no cmake),
# and linked against exactly those prebuilt libraries, which are copied
# beside the binary (rpath $ORIGIN), so llama-bench times the same
# llama.cpp build the other interop tests use.
#
#   bash internal/peers/llama-bench.sh [NODE_MODULES]
#
# NODE_MODULES defaults to $QNNPREP_PEERS_DIR, else <repo>/.peers/node_modules.
# The result is <NODE_MODULES>/../llama-bench/llama-bench. It is built in a
# temporary directory and renamed into place, and skipped when the stamp
# file there names the same bundle commit.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nm=${1:-${QNNPREP_PEERS_DIR:-$here/../../.peers/node_modules}}
if [ -d "$nm/node_modules" ]; then
	nm=$nm/node_modules
fi
nm=$(cd "$nm" && pwd)
dest=$(dirname "$nm")/llama-bench

bins=$nm/@node-llama-cpp/linux-x64/bins/linux-x64
if [ ! -e "$bins" ]; then
	echo "llama-bench.sh: $bins missing (install the npm peers first: .ci/run)" >&2
	exit 1
fi
for tool in git g++; do
	if ! command -v "$tool" >/dev/null; then
		echo "llama-bench.sh: $tool not found (Debian: apt-get install $tool)" >&2
		exit 1
	fi
done
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
	echo "llama-bench.sh: only linux-x64 prebuilt libraries are installed; this is $(uname -s)-$(uname -m)" >&2
	exit 1
fi

bash "$here/llama-src.sh" "$nm"
src=$(dirname "$nm")/llama.cpp
commit=$(cat "$src/.qnnprep-commit")
# -DNDEBUG as in llama.cpp's release builds (the libraries are release
# builds; llama-bench warns "asserts enabled" without it).
cxxflags="-O2 -DNDEBUG -std=c++17 -pthread"
# The stamp names the commit and the flags: a change to either rebuilds.
stamp="llama.cpp $commit g++ $cxxflags"
if [ -x "$dest/llama-bench" ] && [ "$(cat "$dest/stamp" 2>/dev/null)" = "$stamp" ]; then
	echo "llama-bench already built in $dest ($stamp)"
	exit 0
fi

tmp=$(mktemp -d "$(dirname "$dest")/.llama-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

out=$tmp/out
mkdir "$out"
cp "$bins"/*.so "$out/"
# The libraries carry versioned names (libllama.v0.4.0.so); link by the
# plain name.
for lib in llama ggml; do
	v=$(cd "$out" && ls lib$lib.v*.so 2>/dev/null | head -n 1)
	if [ -z "$v" ]; then
		echo "llama-bench.sh: no lib$lib.v*.so in $bins" >&2
		exit 1
	fi
	ln -sf "$v" "$out/lib$lib.so"
done

echo "compiling llama-bench ($commit) in $tmp"
(
	cd "$src"
	# shellcheck disable=SC2086
	g++ $cxxflags -I include -I common -I ggml/include -I vendor \
		tools/llama-bench/llama-bench.cpp tools/llama-bench/main.cpp \
		-L"$out" -lllama-common -lllama -lggml -lggml-base \
		-Wl,-rpath,'$ORIGIN' -o "$out/llama-bench"
)
"$out/llama-bench" --help >/dev/null
echo "$stamp" >"$out/stamp"

# Rename into place: the old build (if any) is moved aside first and
# removed only once the new one is there.
old=
if [ -e "$dest" ]; then
	old=$tmp/old
	mv "$dest" "$old"
fi
mv "$out" "$dest"
echo "llama-bench built: $dest/llama-bench ($stamp)"
