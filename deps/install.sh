#!/usr/bin/env bash
# deps/install.sh — install the Debian packages of the named groups of deps/debian-packages (the one
# package list of this project) that this machine does not have yet.
#
#   deps/install.sh build                  # what ./quickstart.sh needs
#   deps/install.sh build tests aarch64    # what tests/run-all.sh needs for all three stages
#   deps/install.sh --list tests           # print the group's packages, one per line; install nothing
#   deps/install.sh --check build tests    # exit 1 naming the missing ones; install nothing
#
# A package counts as present when dpkg has it installed, or when an installed package provides it
# (NodeSource's nodejs provides npm, and conflicts with Debian's). Installing needs root or sudo; it
# runs `apt-get update` once, `apt-get install -y --no-install-recommends`, and adds the arm64 foreign
# architecture first when a ":arm64" package is asked for.
# Exit status: 0 when every package of the groups is present (installed now or before); 1 when some
# is missing and could not be installed (or, with --check, is missing); 2 for an unknown group or flag.
set -euo pipefail

LIST="$(cd "$(dirname "$0")" && pwd)/debian-packages"
mode=install
groups=()
for a in "$@"; do
    case "$a" in
        --list) mode=list ;;
        --check) mode=check ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "deps/install.sh: unknown flag '$a' (see --help)" >&2; exit 2 ;;
        *) groups+=("$a") ;;
    esac
done
[ ${#groups[@]} -gt 0 ] || { echo "deps/install.sh: name at least one group of $LIST (see --help)" >&2; exit 2; }

# packages_of GROUP: the group's package names, in file order.
packages_of() {
    awk -v want="$1" '
        { sub(/#.*/, ""); gsub(/^[ \t]+|[ \t]+$/, "") }
        /^\[.*\]$/ { g = substr($0, 2, length($0) - 2); seen[g] = 1; next }
        $0 != "" && g == want { print $1 }
        END { if (!(want in seen)) exit 3 }' "$LIST"
}

wanted=()
for g in "${groups[@]}"; do
    if ! pkgs=$(packages_of "$g"); then
        known=$(sed -n 's/^\[\([^]]*\)\].*/\1/p' "$LIST" | tr '\n' ' ')
        echo "deps/install.sh: no group '$g' in $LIST (groups: $known)" >&2
        exit 2
    fi
    for p in $pkgs; do wanted+=("$p"); done
done

if [ "$mode" = list ]; then
    printf '%s\n' "${wanted[@]}" | awk '!seen[$0]++'
    exit 0
fi

# Names that installed packages provide (virtual packages), one per line.
provided=$(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
           awk -F'|' '$1 ~ /^ii/ { n = split($2, a, ","); for (i = 1; i <= n; i++) {
                          sub(/^ +/, "", a[i]); sub(/ .*/, "", a[i]); if (a[i] != "") print a[i] } }' | sort -u)
# A name without ":arch" means this machine's architecture (or an Architecture: all package): dpkg-query
# alone would also match a foreign copy, e.g. libyaml-dev:arm64 for libyaml-dev.
native=$(dpkg --print-architecture)
installed() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }
present() {
    case "$1" in *:*) installed "$1"; return ;; esac
    installed "$1:$native" || installed "$1:all" || grep -qx -- "$1" <<< "$provided"
}

missing=()
for p in $(printf '%s\n' "${wanted[@]}" | awk '!seen[$0]++'); do
    present "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "deps/install.sh: all packages of [${groups[*]}] are present"
    exit 0
fi
if [ "$mode" = check ]; then
    echo "deps/install.sh: missing Debian packages: ${missing[*]}" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then SUDO=()
elif command -v sudo >/dev/null 2>&1; then SUDO=(sudo)
else
    echo "deps/install.sh: missing Debian packages: ${missing[*]} (run as root, or install sudo)" >&2
    exit 1
fi
echo "deps/install.sh: installing ${missing[*]}"
case " ${missing[*]}" in *:arm64*)
    dpkg --print-foreign-architectures | grep -qx arm64 || "${SUDO[@]}" dpkg --add-architecture arm64 ;;
esac
"${SUDO[@]}" apt-get update || { echo "deps/install.sh: apt-get update failed" >&2; exit 1; }
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
    { echo "deps/install.sh: apt-get install ${missing[*]} failed" >&2; exit 1; }
