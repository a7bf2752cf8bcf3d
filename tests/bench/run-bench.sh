#!/bin/bash
# run-bench.sh SANDBOX SRCDIR BUILDDIR ENGINE STREAMTEST GUEST: boot the
# two-host sandbox for migrate-bench.sh, show its progress live and keep
# the whole output in BUILDDIR/bench-results.txt (the table is at its end).
# VRM_BENCH_* variables pass through (see migrate-bench.sh).
set -u -o pipefail
sandbox=$1 src=$2 build=$3 engine=$4 streamtest=$5 guest=$6
envs="VRM_GUEST_ELF=$guest VRM_BUILD_DIR=$build"
for v in REPEAT MEM METHODS LOADS DIRTY PROFILE TRACE CHANNELS VRM_OPTS VARIANT; do
    val=$(eval "echo \"\${VRM_BENCH_$v:-}\"")
    [ -n "$val" ] && envs+=" VRM_BENCH_$v='$val'"
done
cmd="$envs bash $src/tests/bench/migrate-bench.sh $src $engine $streamtest"
out=$build/bench-results.txt
echo "bench: the whole output goes to $out"
rm -rf "$build/bench-run"
"$sandbox" --hosts 2 --mem 2048 --keep "$build/bench-run" --timeout "${VRM_BENCH_TIMEOUT:-5400}" --follow \
    --a "$cmd" --b "$cmd" 2>&1 | tee "$out"
