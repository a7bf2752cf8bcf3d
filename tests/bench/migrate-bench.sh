#!/bin/bash
# migrate-bench.sh SRCDIR ENGINE STREAMTEST: the performance comparison, in
# one two-host sandbox run (host a = source, host b = destination):
#
#   1. ib_write_bw between the hosts, then the engine alone through 1, 2 and
#      4 channels (tests/rdma/engine/engine-bench.sh);
#   2. the same guest live-migrated through libvirt four ways -- virt-rdma
#      with 1 channel, virt-rdma with 4 multifd channels (5 RDMA channels),
#      QEMU's native RDMA (rdma: URI, pin-all) and plain TCP -- with an idle
#      guest and with a guest dirtying memory, each repeated;
#   3. the scaling table: the idle guest at 64, 128 and 256 MiB, virt-rdma
#      with 1 channel against QEMU's native RDMA;
#   4. host a prints the tables (tests/bench/bench-table.py).
#
# Each migration records libvirt's completed-job statistics (total time,
# downtime, setup time, memory bandwidth), the CPU seconds of QEMU on both
# hosts (/proc, proc-sampler.py) and of the engines on both hosts (their
# own getrusage, from the stats the helper keeps), and the peak pinned
# memory of every process. Every migrated guest is checked on host b: the
# idle guest's RAM hashes the same as on host a before the migration, the
# dirtying guest re-verifies its whole RAM itself.
#
# Environment: VRM_BENCH_REPEAT (3), VRM_BENCH_MEM MiB (128),
# VRM_BENCH_METHODS ("vrm1 vrm4 vrm1t vrm4t native tcp": vrm1t and vrm4t
# are the transparent mode, plain virsh with no --migrateuri),
# VRM_BENCH_LOADS ("idle dirty"),
# VRM_BENCH_DIRTY (guest command line of the dirtying guest),
# VRM_BENCH_PROFILE=1 (perf record, system-wide on both hosts, during the
# first run of every method; reports kept with the results),
# VRM_BENCH_TRACE=1 (libvirt logs its QEMU monitor traffic, virt-rdmad and
# the engines log at debug level; the logs are kept with the results),
# VRM_BENCH_CHANNELS (the engine-alone channel counts, "1 2 4"),
# VRM_BENCH_VRM_OPTS (more options for `virt-rdma migrate`, for experiments),
# VRM_BENCH_DISTRO (12, the default: this machine's Debian 12 root; 13:
# Debian 13 hosts and virt-rdma built for them, tests/compat; run-bench.sh),
# VRM_BENCH_VARIANT (options of the method "vrm1x": 1 channel with these
# options, to compare a setting with the default in the same run, e.g.
# VRM_BENCH_METHODS="vrm1 vrm1x native" VRM_BENCH_VARIANT="--chunk-size 256K"),
# VRM_BENCH_SCALE (guest sizes in MiB of the scaling table, "64 128 256";
# empty: none), VRM_BENCH_SCALE_REPEAT (1).
set -u
srcdir=$1 engine=$2 streamtest=$3
. "$srcdir/tests/e2e/e2e-lib.sh"
bench=$srcdir/tests/bench
repeat=${VRM_BENCH_REPEAT:-3}
mem=${VRM_BENCH_MEM:-128}
methods=${VRM_BENCH_METHODS:-vrm1 vrm4 vrm1t vrm4t native tcp}
loads=${VRM_BENCH_LOADS:-idle dirty}
dirty_cmdline=${VRM_BENCH_DIRTY:-dirty_kb=8192 pause=400}
vrm_opts=${VRM_BENCH_VRM_OPTS:-}
variant_opts=${VRM_BENCH_VARIANT:-}
scale_sizes=${VRM_BENCH_SCALE-64 128 256}
scale_repeat=${VRM_BENCH_SCALE_REPEAT:-1}
for m in $methods; do
    case $m in
        vrm1|vrm4|vrm1t|vrm4t|native|tcp) ;;
        vrm1x) [ -n "$variant_opts" ] || fail "method vrm1x needs VRM_BENCH_VARIANT" ;;
        *) fail "unknown method '$m' in VRM_BENCH_METHODS; known: vrm1 vrm1x vrm4 vrm1t vrm4t native tcp" ;;
    esac
done
export VRM_BENCH_VARIANT=$variant_opts   # the table names it
res=$SHARED/results
mkdir -p "$res"
virt_rdma=$VRM_BUILD_DIR/tools/cli/virt-rdma
dest=qemu+tcp://$VRM_PEER_ADDR/system
state_dirs="/var/local/lib/virt-rdma /var/lib/virt-rdma"
# QEMU's own RDMA needs --postcopy on Debian 12 and refuses it on Debian 13
# (tests/e2e/native-rdma.sh says why)
native_postcopy=--postcopy
[ "${VRM_NATIVE_RDMA_POSTCOPY:-1}" = 1 ] || native_postcopy=

# 0. the CPU yardstick (copy-rate.sh), here and on the machine
# (run-bench.sh), to scale the engine's own CPU time to real cores
if [ "$VRM_SANDBOX_HOST" = a ]; then
    bash "$bench/copy-rate.sh" 64 3 > "$res/copy-rate-sandbox.txt"
fi

# 1. the link and the engine alone
say "ib_write_bw and the engine alone (1, 2, 4 channels)"
VRM_BENCH_OUT=$res/engine.txt bash "$srcdir/tests/rdma/engine/engine-bench.sh" \
    "$engine" "$streamtest" 128 1M || fail "the engine benchmark failed"
[ "$VRM_SANDBOX_HOST" = b ] && flag engine-done || wait_flag engine-done 120

# 2. migrations
if [ -n "${VRM_BENCH_TRACE:-}" ]; then
    export VRM_LIBVIRT_LOG_LEVEL=1 VRM_LIBVIRT_LOG_FILTERS="1:qemu.qemu_monitor_json"
    export VRM_HELPER_LOG="--verbose --engine-debug"
    trap 'mkdir -p "$res/logs-$VRM_SANDBOX_HOST"; cp /tmp/virt-rdmad.log /var/log/libvirt/libvirtd.log \
              $(for d in $state_dirs; do echo "$d/job-*.log"; done) "$res/logs-$VRM_SANDBOX_HOST/" 2>/dev/null' EXIT
fi
start_virt_rdma
start_libvirt
[ "$VRM_SANDBOX_HOST" = b ] && flag libvirt-b || wait_flag libvirt-b 180

engine_stats_list() { ls $(for d in $state_dirs; do echo "$d/job-*.stats.json"; done) 2>/dev/null | sort; }

guest_hash() {  # NAME: SHA-256 of the RAM the guest filled (4 MiB up)
    local f=/tmp/$1.mem out
    out=$(virsh -q qemu-monitor-command "$1" --hmp \
              "pmemsave 0x400000 $(( (mem - 4) * 1048576 )) \"$f\"" 2>&1)
    [ -s "$f" ] || { echo "pmemsave of $1 failed: $out" >&2; return 1; }
    out=$(sha256sum "$f") || return 1
    rm -f "$f"
    echo "${out%% *}"
}

migrate_cmd() {  # METHOD NAME: every migration has a deadline
    case $1 in
        vrm1) timeout 600 "$virt_rdma" migrate --live --p2p --persistent $vrm_opts "$2" "$dest" ;;
        vrm1x) timeout 600 "$virt_rdma" migrate --live --p2p --persistent $vrm_opts $variant_opts \
                   "$2" "$dest" ;;
        vrm4) timeout 600 "$virt_rdma" migrate --live --p2p --persistent $vrm_opts --parallel \
                  --parallel-connections 4 "$2" "$dest" ;;
        # the transparent mode: plain virsh, libvirt's own TCP URI, the
        # source helper's nftables rule steering QEMU into the engine
        vrm1t) timeout 600 virsh migrate --live --p2p --persistent "$2" "$dest" ;;
        vrm4t) timeout 600 virsh migrate --live --p2p --persistent --parallel \
                   --parallel-connections 4 "$2" "$dest" ;;
        native) timeout 600 virsh migrate --live --p2p --persistent --rdma-pin-all $native_postcopy \
                    --migrateuri "rdma://$VRM_PEER_ADDR:49152" \
                    --listen-address "$VRM_PEER_ADDR" "$2" "$dest" ;;
        tcp) timeout 600 virsh migrate --live --p2p --persistent \
                 --migrateuri "tcp://$VRM_PEER_ADDR:49152" "$2" "$dest" ;;
    esac
}

# record FILE KEY=VALUE...: the results of one migration on this host
record() {
    local f=$1
    shift
    python3 - "$f" "$@" <<'PY'
import json, sys
out = {}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    out[k] = v
json.dump(out, open(sys.argv[1], "w"))
PY
}

profile_start() {  # RUN METHOD REP
    [ -n "${VRM_BENCH_PROFILE:-}" ] && [ "$3" = 1 ] || return 0
    echo -1 > /proc/sys/kernel/perf_event_paranoid
    echo 0 > /proc/sys/kernel/kptr_restrict
    # started disabled and enabled through its control FIFO, whose answer
    # says it records: perf takes seconds to start on an emulated CPU,
    # longer than a migration's first seconds
    # (its FIFOs in a directory of its own, not in /tmp itself)
    perf_dir=$(mktemp -d) || fail "cannot make a directory for perf"
    mkfifo "$perf_dir/ctl" "$perf_dir/ack" || fail "cannot make perf's control FIFOs"
    perf record -a -g -e cpu-clock -F 499 -D -1 --control "fifo:$perf_dir/ctl,$perf_dir/ack" \
        -o "$perf_dir/perf.data" > /dev/null 2>&1 &
    perf_pid=$!
    ( exec 3>"$perf_dir/ctl"; echo enable >&3 ) &
    [ "$(timeout 60 head -c 3 "$perf_dir/ack")" = ack ] || fail "perf record did not start"
}
profile_stop() {  # RUN METHOD REP
    [ -n "${VRM_BENCH_PROFILE:-}" ] && [ "$3" = 1 ] || return 0
    kill -INT $perf_pid; wait $perf_pid
    perf report -i "$perf_dir/perf.data" --stdio --no-children --sort comm,dso,symbol \
        --percent-limit 0.3 -g none 2>/dev/null > "$res/perf-$1-$2-$VRM_SANDBOX_HOST.txt"
    perf report -i "$perf_dir/perf.data" --stdio --no-children --sort comm \
        -g none 2>/dev/null > "$res/perf-$1-$2-$VRM_SANDBOX_HOST-comm.txt"
    # the engine's samples: rxe's packet work against its own (perf-split.py)
    perf script -i "$perf_dir/perf.data" -F comm,ip,sym,dso 2>/dev/null |
        python3 "$bench/perf-split.py" > "$res/perf-$1-$2-$VRM_SANDBOX_HOST-split.json"
    rm -rf "$perf_dir"
}

# sampler_start OUT: proc-sampler.py, started early (Python starts slowly on
# an emulated CPU) and told with SIGUSR1 when the migration begins
sampler_start() {
    python3 "$bench/proc-sampler.py" "$1" $state_dirs & spid=$!
    local deadline=$((SECONDS + 60))
    until [ -e "$1.ready" ]; do
        [ $SECONDS -ge $deadline ] && fail "proc-sampler.py did not start"
        nap 0.1
    done
}

# one_run METHOD LOAD REP: one migration of a fresh guest of $mem MiB,
# measured on both hosts and verified on host b. LOAD: idle, dirty, or
# scale-SIZE (the idle guest, for the scaling table)
one_run() {
    local method=$1 load=$2 rep=$3 guest=idle cmdline="idle=1" limit=512
    local name hash out rc start end stats engines before verified
    [ "$load" = dirty ] && guest=dirty cmdline=$dirty_cmdline
    # room for QEMU beside a pinned guest of any size
    [ $((mem + 384)) -gt $limit ] && limit=$((mem + 384))
    run=$((run + 1))
    name=bench$run
    sampler_start "$res/$run-$VRM_SANDBOX_HOST-proc.json"
    if [ "$VRM_SANDBOX_HOST" = a ]; then
        # QEMU's pin-all needs the guest's RAM lockable: libvirt
        # raises QEMU's memlock limit to the memtune hard limit.
        # Every method gets the same domain.
        define_guest "$name" "$mem" "$cmdline" $limit
        # RDMA-enabled for virt-rdma only: the destination's helper
        # negotiates for every migration of an enabled domain
        case $method in vrm*) enable_rdma "$name" ;; esac
        hash=
        if [ $guest = idle ]; then
            wait_serial "$name" "vrm-guest: idle" 60
            hash=$(guest_hash "$name") || fail "cannot read $name's memory"
            echo "$hash" > "$res/$run.hash"
        fi
        wait_flag "ready-$run" 120
        before=$(engine_stats_list)
        kill -USR1 $spid
        profile_start $run $method $rep
        say "run $run: $method, $load guest, repetition $rep"
        start=$(date +%s.%N)
        out=$(migrate_cmd "$method" "$name" 2>&1)
        rc=$?
        end=$(date +%s.%N)
        kill $spid; wait $spid
        profile_stop $run $method $rep
        stats=$(virsh domjobinfo --completed --keep-completed --rawstats "$name" 2>&1)
        engines=$(comm -13 <(echo "$before") <(engine_stats_list) | tr '\n' ' ')
        record "$res/$run-a.json" method=$method load=$load rep=$rep rc=$rc mem=$mem \
            "wall_s=$(echo "$end - $start" | bc)" "output=$out" "jobstats=$stats" \
            "engine_stats=$engines" "engine_json=$(for f in $engines; do cat "$f"; echo; done)"
        if [ $rc -eq 0 ]; then
            say "run $run: migrated in $(echo "$end - $start" | bc) s"
        else
            say "run $run: FAILED ($rc): $(echo "$out" | tr '\r' '\n' | grep -v '^$' | tail -1)"
            virsh -q destroy "$name" >/dev/null 2>&1
        fi
        virsh -q undefine "$name" >/dev/null 2>&1
        flag "migrated-$run"
        wait_flag "done-$run" 300
        check_no_leftovers >/dev/null
    else
        before=$(engine_stats_list)
        kill -USR1 $spid
        profile_start $run $method $rep
        flag "ready-$run"
        wait_flag "migrated-$run" 900
        kill $spid; wait $spid
        profile_stop $run $method $rep
        engines=$(comm -13 <(echo "$before") <(engine_stats_list) | tr '\n' ' ')
        verified=no
        if [ "$(virsh domstate "$name" 2>/dev/null)" = running ]; then
            if [ $guest = idle ]; then
                [ "$(guest_hash "$name")" = "$(cat "$res/$run.hash")" ] && verified=yes
            else
                wait_serial "$name" "verify [0-9]+ ok" 180 && verified=yes
            fi
            [ $verified = yes ] || fail "run $run: the guest's memory differs after the migration"
            virsh -q destroy "$name" >/dev/null
        fi
        virsh -q undefine "$name" >/dev/null 2>&1
        record "$res/$run-b.json" "verified=$verified" "engine_stats=$engines" \
            "engine_json=$(for f in $engines; do cat "$f"; echo; done)"
        check_no_leftovers >/dev/null
        flag "done-$run"
    fi
}

run=0
for load in $loads; do
    for rep in $(seq "$repeat"); do
        for method in $methods; do
            one_run "$method" "$load" "$rep"
        done
    done
done

# 3. scaling: the idle guest at each size, virt-rdma one channel against
# QEMU's native RDMA (which pins all of the guest's RAM)
table_mem=$mem
for size in $scale_sizes; do
    mem=$size
    for rep in $(seq "$scale_repeat"); do
        for method in vrm1 native; do
            one_run "$method" "scale-$size" "$rep"
        done
    done
done
mem=$table_mem

[ "$VRM_SANDBOX_HOST" = a ] || exit 0
# the stack the table was measured on (VRM_BENCH_DISTRO chose it)
VRM_BENCH_STACK="Debian $(cat /etc/debian_version), kernel $(uname -r), libvirt $(libvirtd --version | awk '{print $NF}'), QEMU $(qemu-system-x86_64 --version | awk 'NR == 1 {print $4}')"
export VRM_BENCH_STACK
python3 "$bench/bench-table.py" "$res" "$mem" "$dirty_cmdline" | tee "$SHARED/bench-table.txt"
