#!/usr/bin/env bash
# Extracts llama.cpp's source from the git bundle the npm package
# node-llama-cpp ships (node-llama-cpp/llama/gitRelease.bundle) into
# <NODE_MODULES>/../llama.cpp: llama-bench.sh compiles llama-bench from it,
# and the tests read llama.cpp's tokenizer test vocabularies from its
# models/ (testkit.Vocab).
#
#   bash internal/peers/llama-src.sh [NODE_MODULES]
#
# NODE_MODULES defaults to $QNNPREP_PEERS_DIR, else <repo>/.peers/node_modules.
# The tree is checked out in a temporary directory and renamed into place;
# the stamp file .qnnprep-commit, written last, names the bundle's commit,
# and a tree with the same stamp is kept.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nm=${1:-${QNNPREP_PEERS_DIR:-$here/../../.peers/node_modules}}
if [ -d "$nm/node_modules" ]; then
	nm=$nm/node_modules
fi
nm=$(cd "$nm" && pwd)
dest=$(dirname "$nm")/llama.cpp

bundle=$nm/node-llama-cpp/llama/gitRelease.bundle
if [ ! -e "$bundle" ]; then
	echo "llama-src.sh: $bundle missing (install the npm peers first: .ci/run)" >&2
	exit 1
fi
if ! command -v git >/dev/null; then
	echo "llama-src.sh: git not found (Debian: apt-get install git)" >&2
	exit 1
fi

commit=$(git bundle list-heads "$bundle" | awk '$2 == "HEAD" { print $1 }')
if [ -z "$commit" ]; then
	echo "llama-src.sh: $bundle has no HEAD" >&2
	exit 1
fi
if [ "$(cat "$dest/.qnnprep-commit" 2>/dev/null)" = "$commit" ]; then
	echo "llama.cpp source already in $dest ($commit)"
	exit 0
fi

tmp=$(mktemp -d "$(dirname "$dest")/.llama.cpp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git clone -q --no-checkout "$bundle" "$tmp/src"
git -C "$tmp/src" -c advice.detachedHead=false checkout -q --detach "$commit"
rm -rf "$tmp/src/.git" # the files are all that is read; the bundle keeps the history
echo "$commit" >"$tmp/src/.qnnprep-commit"

# Rename into place: the old tree (if any) is moved aside first and removed
# with the temporary directory.
if [ -e "$dest" ]; then
	mv "$dest" "$tmp/old"
fi
mv "$tmp/src" "$dest"
echo "llama.cpp source extracted: $dest ($commit)"
