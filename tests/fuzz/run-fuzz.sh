#!/bin/sh
# Run the XML fuzzer for a bounded time; used by CI.
#
#   tests/fuzz/run-fuzz.sh BUILDDIR SECONDS
#
# BUILDDIR was set up with CC=clang -Dfuzzing=true
# -Db_sanitize=address,undefined -Db_lundef=false. The seed corpus is the
# XML layer's fixtures (tests/xml/*data*) and the inputs that once broke
# a check (tests/fuzz/regressions, replayed on every start); new inputs go to
# BUILDDIR/tests/fuzz/corpus, crashes to BUILDDIR/tests/fuzz/artifacts.
# Prints the fuzzer's final statistics; exits non-zero on a crash, a leak,
# a sanitizer report or a timeout.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 BUILDDIR SECONDS" >&2
    exit 2
fi
builddir=$1
seconds=$2
srcdir=$(cd "$(dirname "$0")/../.." && pwd)
fuzzer=$builddir/tests/fuzz/vrmxmlfuzz

if [ ! -x "$fuzzer" ]; then
    echo "$0: $fuzzer not found; configure $builddir with -Dfuzzing=true and build it" >&2
    exit 2
fi
case $seconds in
    ''|*[!0-9]*) echo "$0: SECONDS must be a number" >&2; exit 2 ;;
esac

work=$builddir/tests/fuzz/corpus
artifacts=$builddir/tests/fuzz/artifacts/
log=$builddir/tests/fuzz/fuzz.log
mkdir -p "$work" "$artifacts"

export VRM_SCHEMA_DIR="$srcdir/xml/schemas"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

"$fuzzer" \
    -max_total_time="$seconds" \
    -print_final_stats=1 \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -max_len=16384 \
    -dict="$srcdir/tests/fuzz/xml.dict" \
    -artifact_prefix="$artifacts" \
    "$work" \
    "$srcdir/tests/fuzz/regressions" \
    "$srcdir/tests/xml/migrationdata" \
    "$srcdir/tests/xml/migrationdata-invalid" \
    "$srcdir/tests/xml/controldata" \
    "$srcdir/tests/xml/controldata-invalid" \
    "$srcdir/tests/xml/domaindata" \
    "$srcdir/tests/helper/confdata" \
    "$srcdir/tests/helper/confdata-invalid" \
    >"$log" 2>&1
rc=$?

# the last progress line, then libFuzzer's final statistics
grep -E '^#[0-9]+' "$log" | tail -n 1
grep -E '^(stat::|Done [0-9]+ runs)' "$log"
if [ $rc -ne 0 ] || grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log"; then
    echo "vrmxmlfuzz FAILED (exit $rc); the report:" >&2
    grep -nE 'ERROR|runtime error|SUMMARY|artifact|vrmxmlfuzz:' "$log" | head -n 40 >&2
    tail -n 60 "$log" >&2
    [ $rc -ne 0 ] || rc=1
    exit $rc
fi
echo "vrmxmlfuzz: clean after ${seconds}s (log: $log)"
exit 0
