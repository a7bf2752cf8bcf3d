#!/bin/bash
# engine-pair.sh: run one or more engine cases between sandbox hosts a and b.
#
#   engine-pair.sh ENGINE STREAMTEST CASE...
#
# CASE is "NAME|ENGINE OPTIONS|STREAMTEST OPTIONS", for example
#   "imm-1ch|--channels 1|--channels 1 --bytes 3M+17 --reverse-bytes 1M+5"
# Host a runs the source engine and the source stream (QEMU's stand-in),
# host b the destination engine and the destination stream. Case k uses
# rdma_cm port 18515+k (VRM_PAIR_PORT_BASE+k) so that a late case never
# meets an earlier engine.
# @DISK@ in either option list is the case's disk socket (QEMU's NBD copy).
# @TCP@ in the engine options: the transparent mode. The streams are QEMU's
# TCP migration to b's port 49152+k; on a, an nftables rule of the case's
# own table steers them into the source engine's TCP listener (as
# virt-rdmad does), and a connection made straight to that listener must be
# refused while the stream goes on; b's engine connects to the port the
# source's stream was meant for.
# Every case must end with exit 0 on both programs and byte-exact streams.
set -u
engine=$1 streamtest=$2
shift 2
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
token=00112233445566778899aabbccddeeff
work=$(mktemp -d /tmp/vrm-pair.XXXXXX)
rc=0
k=0
for spec in "$@"; do
    IFS='|' read -r name eopts sopts <<<"$spec"
    port=$((${VRM_PAIR_PORT_BASE:-18515} + k))
    sock=/tmp/vrm-mig-$k.sock
    eopts=${eopts//@DISK@//tmp/vrm-disk-$k.sock}
    sopts=${sopts//@DISK@//tmp/vrm-disk-$k.sock}
    tcp=
    qport=$((49152 + k))
    if [[ $eopts == *@TCP@* ]]; then
        tcp=1
        if [ "$host" = a ]; then
            eopts=${eopts//@TCP@/--tcp-listen-fd 8}
            sock=tcp:$VRM_PEER_ADDR:$qport
        else
            eopts=${eopts//@TCP@/--tcp-port-min 49152 --tcp-port-max 49215}
            sock=tcp:$VRM_SELF_ADDR:$qport
        fi
    fi
    k=$((k + 1))
    echo "=== case $name ($host)"
    if [ "$host" = a ] && [ -n "$tcp" ]; then
        # the engine's TCP listener comes as a descriptor, as from virt-rdmad
        # shellcheck disable=SC2086
        python3 "$(dirname "$0")/tcp-listen-exec.py" "$work/tcp-port-$name" "$engine" \
            --role source --listen "$VRM_SELF_ADDR:$port" \
            --token-fd 3 --deadline-connect 60 --idle-timeout 60 --verbose \
            --stats-fd 4 $eopts 2>"$work/engine-$name.log" 3< <(printf %s $token) \
            4>"$work/stats-$name.json" &
        epid=$!
        for _ in $(seq 100); do [ -s "$work/tcp-port-$name" ] && break; sleep 0.1; done
        eport=$(cat "$work/tcp-port-$name")
        nft -f - <<NFT || rc=1
table inet vrm_pair_$k {
    chain out {
        type nat hook output priority -110;
        ip daddr $VRM_PEER_ADDR tcp dport $qport redirect to :$eport
    }
}
NFT
        # a process that connects to the listener itself is refused (the
        # engine closes it); the job goes on
        python3 - "$eport" <<'PY' || { echo "=== case $name: a connection not steered was not refused"; rc=1; }
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.settimeout(10)
sys.exit(0 if s.recv(1) == b"" else 1)
PY
        # shellcheck disable=SC2086
        "$streamtest" --role source --unix "$sock" $sopts &
        spid=$!
        wait $spid
        src=$?
        wait $epid
        erc=$?
        nft delete table inet "vrm_pair_$k"
        grep -q "was not steered to this job" "$work/engine-$name.log" ||
            { echo "=== case $name: the engine did not say why it refused"; rc=1; }
    elif [ "$host" = a ]; then
        # shellcheck disable=SC2086
        "$engine" --role source --qemu-path "$sock" --listen "$VRM_SELF_ADDR:$port" \
            --token-fd 3 --deadline-connect 60 --idle-timeout 60 --verbose \
            --stats-fd 4 --stats-socket "$work/stats.sock" \
            $eopts 2>"$work/engine-$name.log" 3< <(printf %s $token) 4>"$work/stats-$name.json" &
        epid=$!
        # shellcheck disable=SC2086
        "$streamtest" --role source --unix "$sock" $sopts &
        spid=$!
        # the live stats socket, while the stream runs (long cases only)
        sleep 2
        if [ -S "$work/stats.sock" ]; then
            python3 - "$work/stats.sock" <<'PY' || rc=1
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError:
    sys.exit(0)    # the job ended meanwhile
data = b""
while True:
    try:
        b = s.recv(65536)
    except ConnectionResetError:
        # Reset before any byte: the engine closed its listener with our
        # connection not yet accepted, which it does only when it ends. Its
        # exit status and final stats are checked below.
        if data:
            raise
        sys.exit(0)
    if not b:
        break
    data += b
j = json.loads(data)
print("stats socket: state=%s sent=%d mbps=%.1f" % (
    j["state"], j["bytes-sent"], j["mbps"]))
PY
        fi
        wait $spid
        src=$?
        wait $epid
        erc=$?
    else
        # shellcheck disable=SC2086
        "$streamtest" --role destination --unix "$sock" $sopts &
        spid=$!
        qemu=(--qemu-path "$sock")
        [ -n "$tcp" ] && qemu=()
        # shellcheck disable=SC2086
        "$engine" --role destination "${qemu[@]}" --connect "$VRM_PEER_ADDR:$port" \
            --token-fd 3 --deadline-connect 60 --idle-timeout 60 --verbose \
            --stats-fd 4 $eopts 2>"$work/engine-$name.log" 3< <(printf %s $token) \
            4>"$work/stats-$name.json"
        erc=$?
        if [ $erc != 0 ]; then
            kill $spid 2>/dev/null
        fi
        wait $spid
        src=$?
    fi
    grep -E "error|warning" "$work/engine-$name.log" | head -20
    if [ -s "$work/stats-$name.json" ]; then
        python3 - "$work/stats-$name.json" "$name" "$host" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("stats %s %s: state=%s pin_all=%s write_imm=%s channels=%d/%d disks=%d elapsed=%.2fs sent=%d received=%d chunks=%d/%d regs=%d reg_ns=%d pinned=%d stalls=%d completions=%d doorbells=%d mbps_avg=%.1f" % (
    sys.argv[2], sys.argv[3], s["state"], s["pin-all"], s["write-imm"], s["qemu-connections"],
    s["established"], s.get("disk-connections", 0), s["elapsed-s"], s["bytes-sent"], s["bytes-received"], s["chunks"],
    s["chunks-received"], s["registrations"], s["registration-ns"], s["pinned-bytes"],
    s["credit-stalls"], s["completions"], s["doorbells"], s["mbps-average"]))
PY
    fi
    if [ $erc != 0 ] || [ $src != 0 ]; then
        echo "=== case $name ($host): FAILED (engine $erc, stream $src)"
        tail -20 "$work/engine-$name.log"
        rc=1
    else
        echo "=== case $name ($host): ok"
    fi
done
exit $rc
