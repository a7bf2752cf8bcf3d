#!/bin/bash
# engine-bench.sh: in one sandbox run (host a = source, host b = destination)
#   1. ib_write_bw between the hosts at the engine's chunk size,
#   2. the engine carrying a stream of the same total size through 1 channel,
#   3. and through 4 channels (socket to socket, every byte verified),
# then host b prints a table and the line "engine/ib_write_bw = R" (1 channel).
#
#   engine-bench.sh ENGINE STREAMTEST [TOTAL_MIB [CHUNK]]
set -u
engine=$1 streamtest=$2 total_mib=${3:-128} chunk=${4:-1M}
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
dev=${VRM_RDMA_DEVICE:-rxe0}
token=00112233445566778899aabbccddeeff
work=$(mktemp -d /tmp/vrm-bench.XXXXXX)
case $chunk in
    *M) chunk_bytes=$(( ${chunk%M} * 1048576 )) ;;
    *K) chunk_bytes=$(( ${chunk%K} * 1024 )) ;;
    *) chunk_bytes=$chunk ;;
esac
iters=$(( total_mib * 1048576 / chunk_bytes ))

# 1. ib_write_bw (rdma_cm), server on a
if [ "$host" = a ]; then
    ib_write_bw -d "$dev" -R -s "$chunk_bytes" -n "$iters" --report_gbits -p 18700 \
        > "$work/ibwb.txt" 2>&1
else
    for _ in $(seq 50); do
        sleep 0.5
        ib_write_bw -d "$dev" -R -s "$chunk_bytes" -n "$iters" --report_gbits -p 18700 \
            "$VRM_PEER_ADDR" > "$work/ibwb.txt" 2>&1 && break
    done
fi
ibwb=$(awk '/^ *[0-9]+ +[0-9]+ /{print $4}' "$work/ibwb.txt" | tail -1)
[ -n "$ibwb" ] || { echo "ib_write_bw failed:"; cat "$work/ibwb.txt"; exit 1; }

# 2./3. the engine, same total size, 1 and 4 channels
run_engine() {  # PORT CHANNELS
    local port=$1 n=$2 per=$(( total_mib / $2 ))M sock=/tmp/vrm-bench-$1.sock
    if [ "$host" = a ]; then
        "$engine" --role source --unix "$sock" --listen "$VRM_SELF_ADDR:$port" \
            --token $token --channels "$n" --chunk-size "$chunk" --pin-all \
            --stats-file "$work/stats-$port.json" 2>"$work/engine-$port.log" &
        local epid=$!
        "$streamtest" --role source --unix "$sock" --channels "$n" \
            --bytes "$per" --reverse-bytes 0 > "$work/stream-$port.txt" || return 1
        wait $epid || return 1
    else
        "$streamtest" --role destination --unix "$sock" --channels "$n" \
            --bytes "$per" --reverse-bytes 0 > "$work/stream-$port.txt" &
        local spid=$!
        "$engine" --role destination --unix "$sock" --connect "$VRM_PEER_ADDR:$port" \
            --token $token --channels "$n" --chunk-size "$chunk" --pin-all \
            --stats-file "$work/stats-$port.json" 2>"$work/engine-$port.log" || { kill $spid; return 1; }
        wait $spid || return 1
    fi
}
run_engine 18701 1 || { echo "engine, 1 channel, failed"; cat "$work"/engine-18701.log; exit 1; }
run_engine 18702 4 || { echo "engine, 4 channels, failed"; cat "$work"/engine-18702.log; exit 1; }

[ "$host" = b ] || exit 0
# Mbit/s measured by the destination stand-in: first accept to last byte
e1=$(awk '/^streamtest/{print $(NF-1)}' "$work/stream-18701.txt")
e4=$(awk '/^streamtest/{print $(NF-1)}' "$work/stream-18702.txt")
ib_mbit=$(echo "$ibwb * 1000" | bc -l)
printf '\n%-34s %12s %10s\n' "transfer ($total_mib MiB, chunk $chunk)" "Mbit/s" "vs ib_wb"
printf '%-34s %12.1f %10s\n' "ib_write_bw" "$ib_mbit" "1.00"
printf '%-34s %12.1f %10.2f\n' "engine, 1 channel" "$e1" "$(echo "$e1 / $ib_mbit" | bc -l)"
printf '%-34s %12.1f %10.2f\n' "engine, 4 channels" "$e4" "$(echo "$e4 / $ib_mbit" | bc -l)"
printf 'engine/ib_write_bw = %.2f\n' "$(echo "$e1 / $ib_mbit" | bc -l)"
