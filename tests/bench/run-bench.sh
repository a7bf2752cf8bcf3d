#!/bin/bash
# run-bench.sh SANDBOX SRCDIR BUILDDIR ENGINE STREAMTEST GUEST: boot the
# two-host sandbox for migrate-bench.sh, show its progress live and keep
# the whole output in BUILDDIR/bench-results.txt (the table is at its end).
# VRM_BENCH_* variables pass through (see migrate-bench.sh).
# VRM_BENCH_DISTRO=13 runs the same table on Debian 13 hosts: the root and
# the virt-rdma built inside it (tests/compat, made first if missing).
set -u -o pipefail
sandbox=$1 src=$2 build=$3 engine=$4 streamtest=$5 guest=$6
results=$build
boot=()
case "${VRM_BENCH_DISTRO:-12}" in
    12) ;;
    13)
        echo "bench: the Debian 13 root and virt-rdma built in it (tests/compat)"
        VRM_SOURCE_DIR=$src VRM_BUILD_DIR=$build bash "$src/tests/compat/compat-test.sh" 13 root ||
            { echo "bench: cannot make the Debian 13 hosts" >&2; exit 1; }
        d13=$build/compat/debian-13/build
        engine=$d13/${engine#"$build"/}
        streamtest=$d13/${streamtest#"$build"/}
        guest=$d13/${guest#"$build"/}
        build=$d13
        boot=(--distro 13)
        export VRM_NATIVE_RDMA_POSTCOPY=0 ;;
    *) echo "bench: VRM_BENCH_DISTRO must be 12 or 13, not '$VRM_BENCH_DISTRO'" >&2; exit 2 ;;
esac
envs="VRM_GUEST_ELF=$guest VRM_BUILD_DIR=$build VRM_NATIVE_RDMA_POSTCOPY=${VRM_NATIVE_RDMA_POSTCOPY:-1}"
for v in REPEAT MEM METHODS LOADS DIRTY PROFILE TRACE CHANNELS VRM_OPTS VARIANT SCALE SCALE_REPEAT; do
    # set, even empty (VRM_BENCH_SCALE= turns the scaling table off)
    [ -n "$(eval "echo \"\${VRM_BENCH_$v+set}\"")" ] || continue
    val=$(eval "echo \"\${VRM_BENCH_$v}\"")
    envs+=" VRM_BENCH_$v='$val'"
done
# the CPU yardstick on this machine's real cores (migrate-bench.sh step 0)
copy_rate=$(bash "$src/tests/bench/copy-rate.sh" 256 5)
echo "bench: this machine copies $copy_rate bytes/s through a pipe (copy-rate.sh)"
envs+=" VRM_BENCH_MACHINE_COPY_RATE=$copy_rate"
cmd="$envs bash $src/tests/bench/migrate-bench.sh $src $engine $streamtest"
out=$results/bench-results.txt
echo "bench: the whole output goes to $out"
rm -rf "$results/bench-run"
"$sandbox" "${boot[@]}" --hosts 2 --mem 2048 --keep "$results/bench-run" --timeout "${VRM_BENCH_TIMEOUT:-5400}" --follow \
    --a "$cmd" --b "$cmd" 2>&1 | tee "$out"
