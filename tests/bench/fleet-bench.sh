#!/bin/bash
# fleet-bench.sh: `ninja -C build bench-fleet` (issue 34), one boot of three
# sandbox hosts on the emulated switch. Host a holds four guests that keep
# dirtying their RAM; it is drained to b and c (two guests each, all four
# at once) three ways, in one run:
#
#   vrm1  virt-rdma, the per-domain URI, one channel
#   vrm4  virt-rdma, the per-domain URI, --parallel-connections 4
#   tcp   libvirt's own TCP (no --migrateuri: what an orchestrator does)
#
# For each: the time to drain a, each guest's downtime (libvirt's
# completed job on a), each host's busy CPU seconds over the drain (all of
# /proc/stat's busy time, a's four guests' own CPU included: they keep
# running), the engines' CPU seconds on each host (their own getrusage,
# from the job records), and each host's peak pinned memory (VmPin of
# every process, sampled every 0.5 s). Between rounds the guests come
# home to a over RDMA, unmeasured. Every guest verifies its whole RAM on
# the host it lands on. For the tcp round the guests are untagged first
# (no <rdma:migration> metadata: the hook leaves them to libvirt) and
# tagged again where they land. Environment: VRM_FLEET_MEM (MiB per guest, 32),
# VRM_FLEET_METHODS ("vrm1 vrm4 tcp").
set -u
. "$(dirname "$0")/../e2e/fleet-lib.sh"
mem=${VRM_FLEET_MEM:-32}
methods=${VRM_FLEET_METHODS:-vrm1 vrm4 tcp}
for m in $methods; do
    case $m in vrm1|vrm4|tcp) ;; *) fail "unknown method '$m'; known: vrm1 vrm4 tcp" ;; esac
done

# cpu_busy: this host's busy CPU seconds since boot (user, nice, system,
# irq, softirq, steal; USER_HZ ticks)
cpu_busy() {
    awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8 + $9) / hz }' /proc/stat
}

# pin_sampler_start / pin_sampler_stop: the peak of the memory pinned by
# all processes here, in bytes, printed by stop
pin_sampler_start() {
    rm -f /tmp/pin-peak /tmp/pin-stop
    ( peak=0
      until [ -e /tmp/pin-stop ]; do
          now=$(awk '/^VmPin:/ { s += $2 } END { print s * 1024 }' /proc/[0-9]*/status 2>/dev/null)
          [ "$now" -gt "$peak" ] && peak=$now
          echo "$peak" > /tmp/pin-peak
          nap 0.5
      done ) > /dev/null 2>&1 &
}
pin_sampler_stop() { touch /tmp/pin-stop; nap 0.7; cat /tmp/pin-peak; }

# engine_cpu SINCE: the CPU seconds of the engines of this host's job
# records newer than the file SINCE
engine_cpu() {
    local s
    s=$(find /var/lib/virt-rdma -name 'job-*.stats.json' -newer "$1" 2>/dev/null |
        xargs -r python3 -c '
import json, sys
print("%.2f" % sum(json.load(open(f)).get("cpu-user-s", 0) + json.load(open(f)).get("cpu-system-s", 0)
                   for f in sys.argv[1:]))')
    # no engine ran (libvirt's TCP): zero, so that every row has its fields
    echo "${s:-0}"
}

# mark: the start of a round on this host: CPU, pinned sampler, job files
mark() { touch /tmp/round-start; cpu_busy > /tmp/cpu-start; pin_sampler_start; }
# measure: "CPU_SECONDS ENGINE_CPU_SECONDS PEAK_PINNED_MIB" of the round here
measure() {
    local start end peak
    start=$(cat /tmp/cpu-start) end=$(cpu_busy) peak=$(pin_sampler_stop)
    echo "$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')" \
         "$(engine_cpu /tmp/round-start)" \
         "$(awk -v p="$peak" 'BEGIN { printf "%.1f", p / 1048576 }')"
}

host_setup
if [ "$me" != a ]; then
    flag "ready-$me"
    serve_remote
    exit 0
fi

for g in g1 g2 g3 g4; do start_rdma_guest "$g" "$mem" "dirty_kb=1024"; done
for g in g1 g2 g3 g4; do wait_filled "$g"; wait_locator "$g" sandbox-a; done
wait_ready b
wait_ready c

results=$SHARED/fleet-results
: > "$results"
for m in $methods; do
    case $m in
        vrm1) opts=() ;;
        vrm4) opts=(--parallel --parallel-connections 4) ;;
        tcp) opts=(--tcp) ;;
    esac
    if [ "$m" = tcp ]; then
        for g in g1 g2 g3 g4; do
            virsh -q metadata "$g" --uri "$VRM_NS" --remove --live --config || fail "cannot untag $g"
        done
    fi
    say "round $m: draining a to b (g1 g2) and c (g3 g4)"
    mark
    remote_on b mark > /dev/null
    remote_on c mark > /dev/null
    start=$(date +%s.%N)
    migrate_start g1 b "${opts[@]}"
    migrate_start g2 b "${opts[@]}"
    migrate_start g3 c "${opts[@]}"
    migrate_start g4 c "${opts[@]}"
    for g in g1 g2 g3 g4; do migrate_wait "$g" 600 || fail "round $m: the migration of $g failed"; done
    drain=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
    downtimes=
    for g in g1 g2 g3 g4; do
        d=$(virsh domjobinfo --completed "$g" | awk '/^Total downtime:/ { print $3 }')
        downtimes+="${d:-?} "
    done
    ma=$(measure) mb=$(remote_on b measure | sed 's/^  \[b\] //') mc=$(remote_on c measure | sed 's/^  \[c\] //')
    echo "$m $drain $downtimes$ma $mb $mc" >> "$results"
    say "round $m: a drained in $drain s"
    if [ "$m" = tcp ]; then
        # untagged, they carry no locator: verified, then tagged again here
        remote_on b "check_arrived g1 && check_arrived g2 && enable_rdma g1 && enable_rdma g2" ||
            fail "round $m: g1 and g2 did not arrive on b intact"
        remote_on c "check_arrived g3 && check_arrived g4 && enable_rdma g3 && enable_rdma g4" ||
            fail "round $m: g3 and g4 did not arrive on c intact"
    else
        remote_on b "arrived g1 && arrived g2" || fail "round $m: g1 and g2 did not arrive on b intact"
        remote_on c "arrived g3 && arrived g4" || fail "round $m: g3 and g4 did not arrive on c intact"
    fi
    # home again over RDMA, four at once, unmeasured
    for g in g1 g2; do remote_nowait b "migrate_start $g a --parallel --parallel-connections 4"; done
    for g in g3 g4; do remote_nowait c "migrate_start $g a --parallel --parallel-connections 4"; done
    remote_on b "migrate_wait g1 600 && migrate_wait g2 600" > /dev/null || fail "g1 and g2 did not come home"
    remote_on c "migrate_wait g3 600 && migrate_wait g4 600" > /dev/null || fail "g3 and g4 did not come home"
    for g in g1 g2 g3 g4; do [ "$(virsh domstate "$g")" = running ] || fail "$g did not come home"; done
done

python3 - "$results" "$mem" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
names = {"vrm1": "virt-rdma, 1 channel", "vrm4": "virt-rdma, parallel 4", "tcp": "libvirt TCP"}
print()
print("bench-fleet: host a drained of 4 guests of %s MiB (dirtying 1 MiB) to b and c, all at once" % sys.argv[2])
print("%-22s %8s  %-23s  %-17s  %-17s  %-17s" % ("method", "drain s", "downtime ms g1-g4",
      "CPU s a/b/c", "engine CPU s a/b/c", "peak pinned MiB a/b/c"))
for r in rows:
    m, drain, d = r[0], r[1], r[2:6]
    a, b, c = r[6:9], r[9:12], r[12:15]
    print("%-22s %8s  %-23s  %-17s  %-17s  %-17s" % (names.get(m, m), drain, " ".join(d),
          "/".join((a[0], b[0], c[0])), "/".join((a[1], b[1], c[1])), "/".join((a[2], b[2], c[2]))))
base = {r[0]: float(r[1]) for r in rows}
if "tcp" in base:
    for m in ("vrm1", "vrm4"):
        if m in base:
            print("%s drains in %.2fx the time of libvirt TCP" % (names[m], base[m] / base["tcp"]))
PY
remote_stop b; remote_stop c
say "done"
