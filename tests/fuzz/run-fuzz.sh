#!/bin/sh
# Run the fuzzers for a bounded time each; used by CI.
#
#   tests/fuzz/run-fuzz.sh BUILDDIR SECONDS [FUZZER...]
#
# FUZZER is vrmxmlfuzz, vrmwirefuzz, vrmchannelfuzz, vrmstatsfuzz,
# vrmpeerfuzz or vrmcontrolfuzz (all of them by default), one after the other. BUILDDIR was set up with
# CC=clang -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false.
# Each fuzzer starts from its seeds and from the inputs that once broke a
# check (replayed on every start); new inputs go to
# BUILDDIR/tests/fuzz/NAME-corpus, crashes to BUILDDIR/tests/fuzz/artifacts.
# Prints each fuzzer's final statistics (the executions are in
# stat::number_of_executed_units); exits non-zero on a crash, a leak, a
# sanitizer report or a timeout in any of them.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILDDIR SECONDS [FUZZER...]" >&2
    exit 2
fi
builddir=$1
seconds=$2
shift 2
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
case $seconds in
    ''|*[!0-9]*) echo "$0: SECONDS must be a number" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || set -- vrmxmlfuzz vrmwirefuzz vrmchannelfuzz vrmstatsfuzz \
    vrmpeerfuzz vrmcontrolfuzz

export VRM_SCHEMA_DIR="$srcdir/xml/schemas"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
t=$srcdir/tests
artifacts=$builddir/tests/fuzz/artifacts/
mkdir -p "$artifacts"

status=0
for name in "$@"; do
    fuzzer=$builddir/tests/fuzz/$name
    work=$builddir/tests/fuzz/$name-corpus
    log=$builddir/tests/fuzz/$name.log
    if [ ! -x "$fuzzer" ]; then
        echo "$0: $fuzzer not found; configure $builddir with -Dfuzzing=true and build it" >&2
        exit 2
    fi
    case $name in
    vrmxmlfuzz)
        opts="-max_len=16384 -dict=$t/fuzz/xml.dict"
        seeds="$t/fuzz/regressions $t/xml/migrationdata $t/xml/migrationdata-invalid
               $t/xml/controldata $t/xml/controldata-invalid $t/xml/peerdata
               $t/xml/peerdata-invalid $t/xml/domaindata
               $t/helper/confdata $t/helper/confdata-invalid" ;;
    vrmwirefuzz)
        opts="-max_len=4200"
        seeds="$t/fuzz/seeds-wire" ;;
    vrmchannelfuzz)
        opts="-max_len=8192"
        seeds="$t/fuzz/seeds-channel $t/fuzz/regressions-channel" ;;
    vrmstatsfuzz)
        opts="-max_len=4096 -dict=$t/fuzz/stats.dict"
        seeds="$t/fuzz/seeds-stats" ;;
    vrmpeerfuzz)
        # byte 0: the size of each read; then frames of up to 64 KiB
        opts="-max_len=16384 -dict=$t/fuzz/xml.dict"
        seeds="$t/fuzz/seeds-peer" ;;
    vrmcontrolfuzz)
        opts="-max_len=16384 -dict=$t/fuzz/xml.dict"
        seeds="$t/fuzz/seeds-control" ;;
    *)
        echo "$0: unknown fuzzer $name" >&2
        exit 2 ;;
    esac
    mkdir -p "$work"
    # shellcheck disable=SC2086
    "$fuzzer" \
        -max_total_time="$seconds" \
        -print_final_stats=1 \
        -timeout=10 \
        -rss_limit_mb=2048 \
        $opts \
        -artifact_prefix="$artifacts$name-" \
        "$work" $seeds \
        >"$log" 2>&1
    rc=$?

    # the last progress line, then libFuzzer's final statistics
    echo "== $name"
    grep -E '^#[0-9]+' "$log" | tail -n 1
    grep -E '^(stat::|Done [0-9]+ runs)' "$log"
    if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
        echo "$name FAILED (exit $rc); the report:" >&2
        grep -nE 'ERROR|runtime error|SUMMARY|artifact|fuzz:' "$log" | head -n 40 >&2
        tail -n 60 "$log" >&2
        status=1
        continue
    fi
    echo "$name: clean after ${seconds}s (log: $log)"
done
exit $status
