#!/usr/bin/env bash
# tests/fuzz/run.sh — build the libFuzzer targets of tests/fuzz with clang (AddressSanitizer + UBSan) in
# build-fuzz/ and run each one for a fixed time on its seed corpus; fail on any finding.
#
# Usage: tests/fuzz/run.sh [--seconds N] [--runs R] [--jobs J] [--no-build] [TARGET...]
#   --seconds N   fuzzing time per target (default 60; 0: only replay the corpus and regression inputs)
#   --runs R      stop a target after R executions when that comes before N seconds (the long run:
#                 --runs 10000000 --seconds 14400)
#   --jobs J      targets run at the same time (default: the number of CPUs)
#   --no-build    use the targets already in build-fuzz/
#   TARGET        names as in tests/fuzz/CMakeLists.txt (gguf, model, ...); default: every target built
# Environment: FUZZ_BUILD_DIR (default build-fuzz), CC/CXX (default clang/clang++; Debian's clang and
# libclang-rt-dev, deps/debian-packages [fuzz]).
#
# Each target first replays its committed inputs (tests/fuzz/corpus/T and tests/fuzz/regressions/T), then
# fuzzes for N seconds with the dictionary of its format (tests/fuzz/dict/: gguf, json, yaml, chat). The
# corpus it grows lives in build-fuzz/corpus/T (kept between runs, never written into the repository). A
# finding (crash, sanitizer report, leak, timeout > 10 s, RSS > 2 GiB) leaves its input in
# build-fuzz/findings/ and fails the run; commit that input to tests/fuzz/regressions/T with the fix. The
# summary (executions, rate, corpus size per target) is printed and written to build-fuzz/fuzz-summary.txt.
# Exit status: 0 all passed, 1 a finding or a build failure, 2 bad arguments, 130 stopped by SIGINT or
# SIGTERM (each target stopped is reported INTERRUPTED with its executions so far).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
FUZZ_DIR=$ROOT/tests/fuzz
BUILD=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_PER=60
RUNS=-1
JOBS=$(nproc 2>/dev/null || echo 2)
BUILD_IT=1
TARGETS=()

while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) shift; SECONDS_PER=${1:-}
                   [[ "$SECONDS_PER" =~ ^[0-9]+$ ]] || { echo "run.sh: --seconds needs a whole number (got '$SECONDS_PER')" >&2; exit 2; } ;;
        --runs) shift; RUNS=${1:-}
                [[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --runs needs a positive number (got '$RUNS')" >&2; exit 2; } ;;
        --jobs) shift; JOBS=${1:-}
                [[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --jobs needs a positive number (got '$JOBS')" >&2; exit 2; } ;;
        --no-build) BUILD_IT=0 ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \?//'; exit 0 ;;
        -*) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) TARGETS+=("$1") ;;
    esac
    shift
done

# The dictionary of a target (tests/fuzz/dict/): tokens of the format its input is in.
dict_of() {
    case "$1" in
        gguf|model) echo gguf ;;
        hf_tokenizer_json|hf_config|safetensors|server_request) echo json ;;
        board|cluster_plan|tile_file) echo yaml ;;
        chat) echo chat ;;
        *) echo "" ;;
    esac
}

# Per-target limits: the largest input libFuzzer makes (the seeds of gguf and model are dummy models).
max_len() {
    case "$1" in
        model) echo 65536 ;;
        gguf|hf_tokenizer_json|hf_tokenizer_model) echo 32768 ;;
        *) echo 8192 ;;
    esac
}

# The targets tests/fuzz/CMakeLists.txt defines (cluster_plan only where Open MPI is found).
KNOWN=$(sed -n 's/^ *fuzz_target(\([a-z_0-9]*\) .*/\1/p' "$FUZZ_DIR/CMakeLists.txt")
for t in "${TARGETS[@]}"; do
    printf '%s\n' "$KNOWN" | grep -qx "$t" ||
        { echo "run.sh: unknown target '$t' (known: $(echo $KNOWN))" >&2; exit 2; }
done

if [ "$BUILD_IT" = 1 ]; then
    export CC=${CC:-clang} CXX=${CXX:-clang++}
    if ! command -v "$CC" >/dev/null || ! command -v "$CXX" >/dev/null; then
        echo "run.sh: $CC / $CXX not found: install deps/debian-packages [fuzz] (deps/install.sh fuzz)" >&2
        exit 1
    fi
    GEN=()
    command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/CMakeCache.txt" ] && GEN=(-G Ninja)
    mkdir -p "$BUILD"
    cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBITNET_BUILD_TESTS=OFF \
        -DBITNET_FUZZ=ON -DBITNET_SANITIZE=address,undefined \
        -DBITNET_GENERATED_DIR="$ROOT/generated" -DBITNET_LUT_TABLE=default >"$BUILD/configure.log" 2>&1 ||
        { cat "$BUILD/configure.log"; echo "run.sh: configure failed" >&2; exit 1; }
    if [ ${#TARGETS[@]} -gt 0 ]; then
        cmake --build "$BUILD" --parallel "$JOBS" --target "${TARGETS[@]/#/fuzz_}" || { echo "run.sh: build failed" >&2; exit 1; }
    else
        cmake --build "$BUILD" --parallel "$JOBS" --target fuzz_all || { echo "run.sh: build failed" >&2; exit 1; }
    fi
fi

if [ ${#TARGETS[@]} -eq 0 ]; then
    for b in "$BUILD"/bin/fuzz_*; do [ -x "$b" ] && TARGETS+=("${b##*/fuzz_}"); done
fi
[ ${#TARGETS[@]} -gt 0 ] || { echo "run.sh: no fuzz targets in $BUILD/bin" >&2; exit 1; }
for t in "${TARGETS[@]}"; do
    [ -x "$BUILD/bin/fuzz_$t" ] || { echo "run.sh: unknown target '$t' (no $BUILD/bin/fuzz_$t)" >&2; exit 2; }
done

mkdir -p "$BUILD/findings" "$BUILD/logs"
for t in "${TARGETS[@]}"; do rm -f "$BUILD/logs/$t.result"; done
# The targets' scratch files (fuzz_util.h) go to a directory of this run, removed at the end even when a
# target died on a finding (its own atexit cleanup does not run then); tmpfs when there is one.
SCRATCH=$(mktemp -d "$( [ -w /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/bitnet-fuzz-run.XXXXXX") ||
    { echo "run.sh: cannot make a scratch directory" >&2; exit 1; }
trap 'rm -rf "$SCRATCH"' EXIT
export BITNET_FUZZ_SCRATCH=$SCRATCH
# ASan: report leaks; a 32 MiB quarantine (freed blocks stay poisoned across many inputs, each input's own
# use-after-free is still caught) and no 0xbe fill of new blocks: both cost page faults, which made the
# targets 1.5-2x slower on this project's VMs. UBSan: stop at the first report with a stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:quarantine_size_mb=32:max_malloc_fill_size=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run_target T: replay, then fuzz; writes $BUILD/logs/T.result ("passed ..." or "FAILED ...").
run_target() {
    local t=$1 bin=$BUILD/bin/fuzz_$1 log=$BUILD/logs/$1.log res=$BUILD/logs/$1.result
    local inputs=()
    for d in "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/regressions/$t"; do
        [ -d "$d" ] && [ -n "$(ls -A "$d" 2>/dev/null)" ] && inputs+=("$d"/*)
    done
    : >"$log"
    if [ ${#inputs[@]} -gt 0 ] && ! "$bin" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$BUILD/findings/$t-" \
            "${inputs[@]}" >>"$log" 2>&1; then
        echo "FAILED replaying the committed inputs (see $log)" >"$res"
        return
    fi
    if [ "$SECONDS_PER" = 0 ]; then
        echo "passed (replayed ${#inputs[@]} inputs)" >"$res"
        return
    fi
    local work=$BUILD/corpus/$t
    mkdir -p "$work"
    local dict=()
    local dname
    dname=$(dict_of "$t")
    [ -n "$dname" ] && dict=(-dict="$FUZZ_DIR/dict/$dname.dict")
    local seeds=()
    [ -d "$FUZZ_DIR/corpus/$t" ] && seeds+=("$FUZZ_DIR/corpus/$t")
    [ -d "$FUZZ_DIR/regressions/$t" ] && seeds+=("$FUZZ_DIR/regressions/$t")
    local t0=$SECONDS
    # The fuzzer runs in the background so that a SIGINT or SIGTERM to this run reaches it and is waited
    # for: the scratch directory is removed only after the fuzzer has stopped (libFuzzer then prints its
    # statistics and exits 72), and an interrupted run is reported as such, not as a finding.
    "$bin" "$work" "${seeds[@]}" "${dict[@]}" -max_total_time="$SECONDS_PER" -runs="$RUNS" -max_len="$(max_len "$t")" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$BUILD/findings/$t-" >>"$log" 2>&1 &
    local fpid=$! rc stopped=0
    trap 'stopped=1; kill -INT "$fpid" 2>/dev/null' INT TERM
    wait "$fpid"
    rc=$?
    while [ "$rc" -gt 128 ] && kill -0 "$fpid" 2>/dev/null; do
        wait "$fpid"
        rc=$?
    done
    trap - INT TERM
    local execs rate size
    execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
    rate=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' | tail -1)
    size=$(ls "$work" | wc -l)
    if [ "$rc" = 0 ]; then
        echo "passed: ${execs:-?} executions in $((SECONDS - t0)) s (${rate:-?}/s), corpus $size inputs" >"$res"
    elif [ "$stopped" = 1 ]; then
        echo "INTERRUPTED: ${execs:-?} executions in $((SECONDS - t0)) s (${rate:-?}/s), corpus $size inputs" >"$res"
    else
        echo "FAILED: a finding after $((SECONDS - t0)) s (input in $BUILD/findings/, log $log)" >"$res"
    fi
}

limit="${SECONDS_PER} s"
[ "$RUNS" -gt 0 ] && limit="$limit or $RUNS executions"
echo "==> fuzzing ${#TARGETS[@]} targets, $limit each, $JOBS at a time (logs in $BUILD/logs)"
# SIGINT/SIGTERM: no further target starts; the running ones are told to stop and are waited for.
interrupted=0
trap 'interrupted=1; kill -TERM $(jobs -pr) 2>/dev/null' INT TERM
running=0
for t in "${TARGETS[@]}"; do
    [ "$interrupted" = 1 ] && break
    run_target "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
while [ -n "$(jobs -pr)" ]; do wait; done

{
    echo "fuzz summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), $limit per target, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'))"
    for t in "${TARGETS[@]}"; do
        if [ -f "$BUILD/logs/$t.result" ]; then r=$(cat "$BUILD/logs/$t.result")
        elif [ "$interrupted" = 1 ]; then r="NOT RUN: the run was stopped before this target"
        else r="FAILED: no result"; fi
        printf '  %-20s %s\n' "$t" "$r"
    done
} | tee "$BUILD/fuzz-summary.txt"
status=0
grep -q FAILED "$BUILD/fuzz-summary.txt" && status=1
[ "$interrupted" = 1 ] && [ "$status" = 0 ] && status=130
if [ "$status" != 0 ]; then
    for t in "${TARGETS[@]}"; do
        case "$(cat "$BUILD/logs/$t.result" 2>/dev/null)" in
            FAILED*) echo; echo "==> $t: last lines of $BUILD/logs/$t.log"; tail -40 "$BUILD/logs/$t.log" ;;
        esac
    done
fi
exit "$status"
