#!/bin/bash
# engine-stress.sh: the case of issue 39, repeated. Seven channels, each
# carrying a large stream in both directions at once with writes and reads
# of pseudo-random sizes (1 byte to 300 KB), the engine's default settings
# (WRITE_WITH_IMM, dynamic registration, 1 MiB chunks), run RUNS times in
# one sandbox boot, one after the other. Each run must end with exit 0 on
# both engines and both stream testers, and byte-exact streams.
#
#   engine-stress.sh ENGINE STREAMTEST RUNS [SIZE] [ENGINE OPTIONS...]
#
# SIZE is each stream's size (default 77M+13). VRM_STRESS_HOG=guest adds a
# CPU hog beside the engines on both hosts (the failure came under load);
# the run target can also load this machine's cores (VRM_STRESS_HOG=host,
# stress-target.sh). After every run each host prints rxe's
# own counters that moved (retransmissions, sequence errors, RNR NAKs,
# drops), so a failure comes with what the wire did; host b prints the
# tally "stress: N runs, N passed, N failed" at the end. With
# VRM_STRESS_CAPTURE=1 each host also captures the RoCE headers of every
# run (tcpdump) and keeps the capture of a failed run in the shared
# directory (tests/rdma/engine/roce-trace.py reads it).
set -u
engine=$1 streamtest=$2 runs=$3 size=${4:-77M+13}
shift 3
[ $# -gt 0 ] && shift
eopts="--channels 7 $*"
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?run inside vrm-sandbox}
dev=${VRM_RDMA_DEVICE:-rxe0}
pair=$(dirname "$0")/engine-pair.sh
counters=/sys/class/infiniband/$dev/ports/1/hw_counters

# rxe's counters, the NIC's and the UDP layer's drops, "name value" per line
read_counters() {
    local f
    for f in "$counters"/*; do
        [ -r "$f" ] && echo "$(basename "$f") $(cat "$f")"
    done
    for f in rx_dropped tx_dropped rx_errors tx_errors; do
        echo "nic_$f $(cat "/sys/class/net/${VRM_SANDBOX_NETDEV:?}/statistics/$f")"
    done
    awk '/^Udp:/ && !h { for (i = 2; i <= NF; i++) k[i] = $i; h = 1; next }
         /^Udp:/ { for (i = 2; i <= NF; i++) print "udp_" k[i], $i }' /proc/net/snmp
    local d=0 drops
    while read -r _ drops _; do
        d=$((d + 16#$drops))
    done < /proc/net/softnet_stat
    echo "softnet_dropped $d"
}

# VRM_STRESS_NETEM="loss 1%": a lossy wire (tc netem on each host's NIC)
# instead of load, so that rxe's retransmissions happen at once
if [ -n "${VRM_STRESS_NETEM:-}" ]; then
    modprobe sch_netem 2>/dev/null
    # shellcheck disable=SC2086
    tc qdisc add dev "${VRM_SANDBOX_NETDEV:?}" root netem $VRM_STRESS_NETEM ||
        { echo "stress: cannot add netem $VRM_STRESS_NETEM"; exit 1; }
fi

hog_pid=
if [ "${VRM_STRESS_HOG:-}" = guest ]; then
    # a busy loop at the engines' priority on the host's one vCPU
    bash -c 'while :; do :; done' &
    hog_pid=$!
fi

passed=0 failed=0
for i in $(seq "$runs"); do
    before=$(read_counters)
    cap_pid=
    if [ "${VRM_STRESS_CAPTURE:-}" = 1 ]; then
        # headers only: BTH, RETH and AETH fit in the first 96 bytes
        tcpdump -i "${VRM_SANDBOX_NETDEV:?}" -s 96 -U -w "/tmp/stress-$i.pcap" \
            udp port 4791 2>/dev/null &
        cap_pid=$!
    fi
    # each run on its own rdma_cm port (engine-pair.sh: base + case number)
    VRM_PAIR_PORT_BASE=$((18600 + i)) bash "$pair" "$engine" "$streamtest" \
        "stress-$i|$eopts|--channels 7 --bytes $size --reverse-bytes $size --irregular --deadline 120" \
        > "/tmp/stress-$i.out" 2>&1
    rc=$?
    if [ -n "$cap_pid" ]; then
        sleep 1
        kill "$cap_pid" 2>/dev/null
        wait "$cap_pid" 2>/dev/null
        [ $rc = 0 ] || cp "/tmp/stress-$i.pcap" "$shared/stress-$host-$i.pcap"
        rm -f "/tmp/stress-$i.pcap"
    fi
    grep -E "^=== case|^stats |streamtest|FAILED|ERROR|error" "/tmp/stress-$i.out" | head -40
    # what rxe did during the run: the counters that moved
    join <(echo "$before" | sort) <(read_counters | sort) |
        awk '$3 != $2 { printf "%s+%d ", $1, $3 - $2 } END { print "" }' |
        sed "s/^/rxe $host run $i: /"
    if [ $rc = 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        cp "/tmp/stress-$i.out" "$shared/stress-$host-$i.out" 2>/dev/null
    fi
    echo "stress $host run $i: $([ $rc = 0 ] && echo ok || echo FAILED)"
done
[ -n "$hog_pid" ] && kill "$hog_pid"
echo "stress $host: $runs runs, $passed passed, $failed failed"
[ "$failed" = 0 ]
