#!/bin/bash
# engine-pair.sh: run one or more engine cases between sandbox hosts a and b.
#
#   engine-pair.sh ENGINE STREAMTEST CASE...
#
# CASE is "NAME|ENGINE OPTIONS|STREAMTEST OPTIONS", for example
#   "imm-1ch|--channels 1|--channels 1 --bytes 3M+17 --reverse-bytes 1M+5"
# Host a runs the source engine and the source stream (QEMU's stand-in),
# host b the destination engine and the destination stream. Case k uses
# rdma_cm port 18515+k so that a late case never meets an earlier engine.
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
    port=$((18515 + k))
    sock=/tmp/vrm-mig-$k.sock
    k=$((k + 1))
    echo "=== case $name ($host)"
    if [ "$host" = a ]; then
        # shellcheck disable=SC2086
        "$engine" --role source --unix "$sock" --listen "$VRM_SELF_ADDR:$port" \
            --token $token --deadline-connect 60 --idle-timeout 60 -v \
            --stats-file "$work/stats-$name.json" --stats-socket "$work/stats.sock" \
            $eopts 2>"$work/engine-$name.log" &
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
print("stats socket: state=%s sent=%d mbps_current=%.1f" % (
    j["state"], j["total"]["bytes_sent"], j["total"]["mbps_current"]))
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
        # shellcheck disable=SC2086
        "$engine" --role destination --unix "$sock" --connect "$VRM_PEER_ADDR:$port" \
            --token $token --deadline-connect 60 --idle-timeout 60 -v \
            --stats-file "$work/stats-$name.json" $eopts 2>"$work/engine-$name.log"
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
t = s["total"]
print("stats %s %s: state=%s pin_all=%s write_imm=%s channels=%d elapsed=%.2fs sent=%d received=%d chunks=%d/%d regs=%d reg_us=%d pinned=%d stalls=%d completions=%d mbps_avg=%.1f" % (
    sys.argv[2], sys.argv[3], s["state"], s["pin_all"], s["write_imm"], s["qemu_connections"],
    s["elapsed_s"], t["bytes_sent"], t["bytes_received"], t["chunks_written"],
    t["chunks_received"], t["registrations"], t["registration_us"], t["pinned_bytes"],
    t["credit_stalls"], t["completions"], t["mbps_average"]))
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
