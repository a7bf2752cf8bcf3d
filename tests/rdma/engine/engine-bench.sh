#!/bin/bash
# engine-bench.sh: in one sandbox run (host a = source, host b = destination)
#   1. ib_write_bw between the hosts at the engine's chunk size,
#   2. the engine carrying a stream of the same total size through 1, 2 and
#      4 channels (socket to socket, every byte verified by vrm-streamtest),
# then host b prints a table with Mbit/s, the ratio to ib_write_bw and the
# engines' CPU seconds per GiB (both hosts, from the engines' own
# getrusage), and the line "engine/ib_write_bw = R" (1 channel).
#
#   engine-bench.sh ENGINE STREAMTEST [TOTAL_MIB [CHUNK]]
#
# Everything runs VRM_BENCH_REPEAT times (3), interleaved; the table shows
# medians and the spread. VRM_BENCH_CHANNELS overrides the channel counts
# ("1 2 4"); with
# VRM_BENCH_OUT=FILE host b also writes the results there, one
# "key value" per line, for the migration benchmark's table.
set -u
engine=$1 streamtest=$2 total_mib=${3:-128} chunk=${4:-1M}
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?run inside vrm-sandbox}
dev=${VRM_RDMA_DEVICE:-rxe0}
counts=${VRM_BENCH_CHANNELS:-1 2 4}
repeat=${VRM_BENCH_REPEAT:-3}
token=00112233445566778899aabbccddeeff
work=$(mktemp -d /tmp/vrm-bench.XXXXXX)
case $chunk in
    *M) chunk_bytes=$(( ${chunk%M} * 1048576 )) ;;
    *K) chunk_bytes=$(( ${chunk%K} * 1024 )) ;;
    *) chunk_bytes=$chunk ;;
esac
iters=$(( total_mib * 1048576 / chunk_bytes ))

# 1. ib_write_bw (rdma_cm), server on a
run_ibwb() {  # OUT
    if [ "$host" = a ]; then
        ib_write_bw -d "$dev" -R -s "$chunk_bytes" -n "$iters" -p 18700 \
            > "$1" 2>&1
    else
        for _ in $(seq 50); do
            sleep 0.5
            ib_write_bw -d "$dev" -R -s "$chunk_bytes" -n "$iters" -p 18700 \
                "$VRM_PEER_ADDR" > "$1" 2>&1 && break
        done
    fi
    # "BW average" in perftest's MB/sec (2^20 bytes), as Mbit/s; its
    # Gbit/s report has two decimals only (10 Mbit/s steps)
    awk '/^ *[0-9]+ +[0-9]+ /{printf "%.1f\n", $4 * 1048576 * 8 / 1e6}' "$1" | tail -1 | grep . ||
        { echo "ib_write_bw failed:"; cat "$1"; return 1; }
}

# 2. the engine, same total size split over N channels
run_engine() {  # PORT CHANNELS
    local port=$1 n=$2 per=$(( total_mib * 1048576 / $2 )) sock=/tmp/vrm-bench-$1.sock
    if [ "$host" = a ]; then
        "$engine" --role source --qemu-path "$sock" --listen "$VRM_SELF_ADDR:$port" \
            --token-fd 3 --channels "$n" --chunk-size "$chunk" --pin-all \
            --stats-fd 4 2>"$work/engine-$port.log" 3< <(printf %s $token) \
            4>"$work/stats-$port.json" &
        local epid=$!
        "$streamtest" --role source --unix "$sock" --channels "$n" \
            --bytes "$per" --reverse-bytes 0 > "$work/stream-$port.txt" || return 1
        wait $epid || return 1
    else
        "$streamtest" --role destination --unix "$sock" --channels "$n" \
            --bytes "$per" --reverse-bytes 0 > "$work/stream-$port.txt" &
        local spid=$!
        "$engine" --role destination --qemu-path "$sock" --connect "$VRM_PEER_ADDR:$port" \
            --token-fd 3 --channels "$n" --chunk-size "$chunk" --pin-all \
            --stats-fd 4 2>"$work/engine-$port.log" 3< <(printf %s $token) \
            4>"$work/stats-$port.json" || { kill $spid; return 1; }
        wait $spid || return 1
    fi
    cp "$work/stats-$port.json" "$shared/engine-stats-$host-$port.json"
}
# Repeated, interleaved (link, then the engine), for a median and a spread
port=18701
for rep in $(seq "$repeat"); do
    run_ibwb "$work/ibwb-$rep.txt" > "$work/ibwb-$rep.mbit" || exit 1
    for n in $counts; do
        run_engine $port "$n" || { echo "engine, $n channel(s), failed"; cat "$work/engine-$port.log"; exit 1; }
        echo "$rep $n $port" >> "$work/runs.txt"
        port=$((port + 1))
    done
done

[ "$host" = b ] || exit 0
python3 - "$work" "$shared" "$total_mib" "$chunk" "${VRM_BENCH_OUT:-}" <<'PY'
import glob, json, os, re, statistics, sys, time
work, shared, total_mib, chunk, out = sys.argv[1:6]

def cell(v, fmt):
    med = statistics.median(v)
    return (fmt % med) if len(v) == 1 else (fmt + " [" + fmt + "-" + fmt + "]") % (med, min(v), max(v))

ib = [float(open(p).read().split()[0]) for p in sorted(glob.glob(os.path.join(work, "ibwb-*.mbit")))]
ib_med = statistics.median(ib)
runs = {}
for line in open(os.path.join(work, "runs.txt")):
    rep, n, port = map(int, line.split())
    text = open(os.path.join(work, "stream-%d.txt" % port)).read()
    mbit = float(re.search(r"([\d.]+) Mbit/s", text).group(1))
    cpu, gib = 0.0, 0.0
    for h in "ab":
        path = os.path.join(shared, "engine-stats-%s-%d.json" % (h, port))
        deadline = time.time() + 60
        while not os.path.exists(path) and time.time() < deadline:
            time.sleep(0.2)
        s = json.load(open(path))
        cpu += s["cpu-user-s"] + s["cpu-system-s"]
        gib = max(gib, (s["bytes-sent"] + s["bytes-received"]) / 2**30)
    runs.setdefault(n, []).append((mbit, cpu / gib))
lines = ["ib_write_bw_mbit %.1f" % ib_med, "ib_write_bw_cell %s" % cell(ib, "%.1f").replace(" ", "")]
print()
print("%-28s %24s %8s %22s" % ("transfer (%s MiB, chunk %s)" % (total_mib, chunk),
                                "Mbit/s", "/ib_wb", "engine CPU s/GiB"))
print("%-28s %24s %8s %22s" % ("ib_write_bw", cell(ib, "%.1f"), "1.00", "-"))
for n in sorted(runs):
    mb = [r[0] for r in runs[n]]
    cg = [r[1] for r in runs[n]]
    print("%-28s %24s %8.2f %22s" % ("engine, %d channel%s" % (n, "s" if n > 1 else ""),
                                    cell(mb, "%.1f"), statistics.median(mb) / ib_med, cell(cg, "%.1f")))
    lines.append("engine_%dch_mbit %.1f" % (n, statistics.median(mb)))
    lines.append("engine_%dch_cell %s" % (n, cell(mb, "%.1f").replace(" ", "")))
    lines.append("engine_%dch_cpu_s_per_gib %.2f" % (n, statistics.median(cg)))
print("(median [min-max] of %d runs; engine CPU: both engines, user + system, per GiB carried)"
      % len(ib))
print("engine/ib_write_bw = %.2f" % (statistics.median([r[0] for r in runs[min(runs)]]) / ib_med))
if out:
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
PY
