#!/bin/bash
# helper-rdma.sh: virt-rdmad on both sandbox hosts, the hook run on host b
# exactly as libvirt runs it, engines spawned by the helpers.
#
#   helper-rdma.sh BUILDDIR STREAMTEST CASE
#
# CASE:
#   roundtrip  one job: a opens it, b's hook accepts the offer, vrm-streamtest
#              stands in for QEMU on both ends; streams byte-exact, both
#              jobs completed with final stats in their records
#   four       four jobs at once, each with its own engine, path and port
#   refusals   version, limits, missing device, helper not running: the
#              hook exits 1 with the right one line
#   kill       b's engine is killed mid-stream: the job fails on both helpers
#   restart    a's helper is stopped and started again mid-stream: it finds
#              its engine again, and the job completes with its final stats
#
# Host a is the source (198.18.0.1), host b the destination; they meet
# through files in $VRM_SANDBOX_SHARED.
set -u
build=$1 streamtest=$2 case=$3
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?}/helper-$case
daemon=$build/driver/helper/virt-rdmad
engine=$build/driver/virt-rdma-engine
hook=$build/tools/hook/virt-rdma-hook
ctl=$build/tests/helper/vrmhelperctl
work=/tmp/vrm-helper-$case
mkdir -p "$work" "$shared"
export VRM_HELPER_SOCKET=/run/virt-rdma/virt-rdmad.sock

say() { echo "[$host] $*"; }

# End the helpers this script started (their engines end with their jobs)
stop_helpers() {
    local f
    for f in "$work"/helper-*.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
}
trap stop_helpers EXIT
fail() {
    say "FAIL: $*"
    for f in "$work"/helper*.log; do [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }; done
    touch "$shared/failed-$host"
    exit 1
}

# wait_for FILE [SEC]: the other host's mark, or give up (or its failure)
wait_for() {
    local f=$1 t=${2:-120} i=0 other=a
    [ "$host" = a ] && other=b
    while [ ! -e "$f" ]; do
        [ -e "$shared/failed-$other" ] && fail "host $other failed"
        i=$((i + 1))
        [ $i -gt $((t * 10)) ] && fail "timed out waiting for $f"
        sleep 0.1
    done
}

# start_helper NAME SOCKET [CONFIG LINES...]
start_helper() {
    local name=$1 sock=$2
    shift 2
    {
        echo "[rdma]"
        echo "device = ${DEVICE:-rxe0}"
        echo "address = $VRM_SELF_ADDR"
        echo "cm-port-min = 18515"
        echo "cm-port-max = 18530"
        echo "[paths]"
        echo "run-dir = /run/virt-rdma"
        echo "state-dir = $work/state-$name"
        printf '%s\n' "$@"
    } > "$work/$name.conf"
    "$daemon" --config "$work/$name.conf" --socket "$sock" --engine "$engine" \
        --connect-timeout 60 --idle-timeout 60 --verbose >> "$work/helper-$name.log" 2>&1 &
    echo $! > "$work/helper-$name.pid"
    for _ in $(seq 100); do
        VRM_HELPER_SOCKET=$sock "$ctl" list > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "virt-rdmad ($name) did not start"
}

domain_xml() {
    cat <<XML
<domain type='kvm'>
  <name>$1</name>
  <uuid>c7a5fdbd-cdaf-9455-926a-d65c16db18$2</uuid>
  <memory unit='KiB'>1048576</memory>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1"/>
  </metadata>
</domain>
XML
}

# job_attr ID ATTR: an attribute of a job's <job> element
job_attr() {
    "$ctl" query "$1" | grep -o "<job [^>]*" | grep -o "$2=\"[^\"]*\"" | cut -d'"' -f2
}

# wait_state ID STATE SEC
wait_state() {
    local i=0 st
    while :; do
        st=$(job_attr "$1" state)
        [ "$st" = "$2" ] && return 0
        i=$((i + 1))
        [ $i -gt $(($3 * 5)) ] && { "$ctl" query "$1"; return 1; }
        sleep 0.2
    done
}

# The source: open N jobs, publish their domain XML, run the streams
source_jobs() {   # N CHANNELS BYTES RBYTES
    local n=$1 ch=$2 bytes=$3 rbytes=$4 k pids=() rc=0
    for k in $(seq "$n"); do
        domain_xml "web$k" "0$k" | "$ctl" offer "web$k" "$ch" 65536 8 \
            > "$work/web$k.xml" 2> "$work/web$k.job" || fail "cannot open job web$k: $(cat "$work/web$k.job")"
        read -r _ id path < "$work/web$k.job"
        say "job $id for web$k: $path, $(grep -o '<endpoint[^>]*' "$work/web$k.xml")"
        echo "$id" > "$work/web$k.id"
        cp "$work/web$k.xml" "$shared/web$k.xml.tmp" && mv "$shared/web$k.xml.tmp" "$shared/web$k.xml"
        echo "$path" > "$shared/web$k.path"
    done
    live=$("$ctl" list | grep -Ec 'state="(negotiating|connected)"')
    say "$live engines running"
    [ "$live" = "$n" ] || fail "$live engines for $n jobs"
    if [ -n "${FIFTH:-}" ]; then
        domain_xml web5 05 | "$ctl" offer web5 1 65536 8 > /dev/null 2> "$work/fifth.err" &&
            fail "a fifth job was opened with max-jobs = 4"
        grep -q "max-jobs = 4" "$work/fifth.err" || fail "fifth job: $(cat "$work/fifth.err")"
        say "fifth job refused: $(cat "$work/fifth.err")"
    fi
    for k in $(seq "$n"); do
        wait_for "$shared/web$k.ready" 180
    done
    # every QEMU stand-in connects at once
    for k in $(seq "$n"); do
        path=$(cat "$shared/web$k.path")
        "$streamtest" --role source --unix "$path" --channels "$ch" \
            --bytes "$bytes" --reverse-bytes "$rbytes" --deadline 120 \
            > "$work/stream-web$k.log" 2>&1 &
        pids+=($!)
    done
    watch_transfers &
    wpid=$!
    for k in $(seq "$n"); do
        wait "${pids[$((k - 1))]}" || { rc=1; say "stream web$k failed:"; tail -5 "$work/stream-web$k.log"; }
    done
    kill "$wpid" 2>/dev/null
    wait "$wpid" 2>/dev/null
    say "most jobs transferring at once: $(cat "$work/max-transferring" 2>/dev/null)"
    return $rc
}

# The largest number of jobs seen transferring at the same time
watch_transfers() {
    local max=0 now
    while :; do
        now=$("$ctl" list 2>/dev/null | grep -c 'state="transferring"')
        [ "$now" -gt "$max" ] && { max=$now; echo "$max" > "$work/max-transferring"; }
        sleep 0.2
    done
}

# The destination: run the hook on every offer, then QEMU's stand-in
dest_jobs() {   # N CHANNELS BYTES RBYTES
    local n=$1 ch=$2 bytes=$3 rbytes=$4 k pids=() hpids=() rc=0
    for k in $(seq "$n"); do
        wait_for "$shared/web$k.xml" 120
        # exactly as libvirt: argv <domain> migrate begin -, XML on stdin
        "$hook" "web$k" migrate begin - < "$shared/web$k.xml" \
            > "$work/web$k.out.xml" 2> "$work/web$k.hook.err" &
        hpids+=($!)
    done
    for k in $(seq "$n"); do
        wait "${hpids[$((k - 1))]}" || fail "hook for web$k: $(cat "$work/web$k.hook.err")"
        grep -q '<answer status="accepted"' "$work/web$k.out.xml" ||
            fail "no accepted answer for web$k: $(cat "$work/web$k.out.xml")"
        grep -q "<nova:instance" "$work/web$k.out.xml" || fail "the hook lost other metadata"
        path=$(cat "$shared/web$k.path")
        "$ctl" query-domain "web$k" | grep -q "path=\"$path\"" ||
            fail "the destination job of web$k does not use $path"
        say "hook accepted web$k: $(grep -o '<answer[^>]*' "$work/web$k.out.xml")"
    done
    # as libvirt: the destination QEMUs start and listen on the paths
    for k in $(seq "$n"); do
        path=$(cat "$shared/web$k.path")
        "$streamtest" --role destination --unix "$path" --channels "$ch" \
            --bytes "$bytes" --reverse-bytes "$rbytes" --deadline 120 \
            > "$work/stream-web$k.log" 2>&1 &
        pids+=($!)
    done
    for k in $(seq "$n"); do
        path=$(cat "$shared/web$k.path")
        for _ in $(seq 100); do [ -S "$path" ] && break; sleep 0.1; done
        touch "$shared/web$k.ready"
    done
    for k in $(seq "$n"); do
        wait "${pids[$((k - 1))]}" || { rc=1; say "stream web$k failed:"; tail -5 "$work/stream-web$k.log"; }
    done
    return $rc
}

# Every job completed, with its final stats in the record on disk
check_completed() {   # N
    local k id
    for k in $(seq "$1"); do
        if [ "$host" = a ]; then id=$(cat "$work/web$k.id"); else
            id=$("$ctl" query-domain "web$k" | grep -o '<job id="[0-9]*"' | grep -o '[0-9]*'); fi
        wait_state "$id" completed 60 || fail "job $id (web$k) did not complete"
        rec=$work/state-main/job-$id.xml
        grep -q 'state="completed"' "$rec" || fail "record $rec is not completed"
        grep -q '<stats ' "$rec" || fail "record $rec has no stats"
        say "record of job $id (web$k):"
        grep -E '<job |<stats|<socket' "$rec"
    done
}

case_roundtrip() {
    start_helper main "$VRM_HELPER_SOCKET"
    if [ "$host" = a ]; then
        source_jobs 1 2 3M+17 1M+5 || fail "streams"
    else
        dest_jobs 1 2 3M+17 1M+5 || fail "streams"
    fi
    check_completed 1
    "$ctl" list | grep -c '<job ' | sed "s/^/[$host] jobs listed: /"
}

case_four() {
    start_helper main "$VRM_HELPER_SOCKET" "[limits]" "max-jobs = 4"
    if [ "$host" = a ]; then
        FIFTH=1 source_jobs 4 2 8M+3 1M+1 || fail "streams"
        ports=$(cat "$work"/web*.xml | grep -o ' port="[0-9]*"' | sort -u | wc -l)
        [ "$ports" = 4 ] || fail "the four jobs do not have four rdma_cm ports"
    else
        dest_jobs 4 2 8M+3 1M+1 || fail "streams"
    fi
    check_completed 4
}

# expect_refusal NAME SOCKET TEXT: the hook exits 1 with one line saying TEXT
expect_refusal() {
    local name=$1 sock=$2 text=$3 xml=$4 rc
    VRM_HELPER_SOCKET=$sock "$hook" web1 migrate begin - < "$xml" \
        > "$work/$name.out" 2> "$work/$name.err"
    rc=$?
    [ $rc = 1 ] || fail "$name: hook exit $rc, expected 1"
    [ ! -s "$work/$name.out" ] || fail "$name: the hook printed XML"
    [ "$(wc -l < "$work/$name.err")" = 1 ] || fail "$name: not one line: $(cat "$work/$name.err")"
    grep -q -- "$text" "$work/$name.err" || fail "$name: '$(cat "$work/$name.err")' does not say '$text'"
    say "$name refused: $(cat "$work/$name.err")"
}

case_refusals() {
    if [ "$host" = a ]; then
        start_helper main "$VRM_HELPER_SOCKET" "[limits]" "max-jobs = 2"
        domain_xml web1 01 | "$ctl" offer web1 4 65536 8 > "$shared/offer4.xml" 2>/dev/null ||
            fail "cannot open a job"
        domain_xml web2 02 | "$ctl" offer web2 1 65536 8 > "$shared/offer1.xml" 2>/dev/null ||
            fail "cannot open a job"
        # the source's own limit: a third job while two engines run
        domain_xml web3 03 | "$ctl" offer web3 1 65536 8 > /dev/null 2> "$work/third.err" &&
            fail "a third job was opened with max-jobs = 2"
        grep -q "max-jobs = 2" "$work/third.err" || fail "third job: $(cat "$work/third.err")"
        say "third job refused: $(cat "$work/third.err")"
        touch "$shared/offers"
        wait_for "$shared/done-b" 180
        "$ctl" cancel 1 > /dev/null; "$ctl" cancel 2 > /dev/null
        return 0
    fi
    start_helper main "$VRM_HELPER_SOCKET"
    start_helper small /run/virt-rdma/small.sock "[limits]" "max-channels = 2"
    DEVICE=mlx5_0 start_helper nodev /run/virt-rdma/nodev.sock
    wait_for "$shared/offers" 120
    sed -e '/<offer /s/version="1"/version="2"/' "$shared/offer1.xml" > "$work/v2.xml"
    grep -q 'version="2"' "$work/v2.xml" || fail "cannot make a version 2 offer"
    expect_refusal version "$VRM_HELPER_SOCKET" "protocol version 2 of the source is too new" "$work/v2.xml"
    expect_refusal limits /run/virt-rdma/small.sock "channels" "$shared/offer4.xml"
    expect_refusal device /run/virt-rdma/nodev.sock "The RDMA device 'mlx5_0' does not exist on this host" "$shared/offer1.xml"
    expect_refusal no-helper /run/virt-rdma/none.sock "virt-rdmad) is not running on this host" "$shared/offer1.xml"
    # no offer: untouched; another operation: untouched
    domain_xml web9 09 > "$work/plain.xml"
    out=$("$hook" web9 migrate begin - < "$work/plain.xml") || fail "hook without offer failed"
    [ -z "$out" ] || fail "hook without offer printed XML"
    "$hook" web1 prepare begin - < "$shared/offer1.xml" > "$work/prep.out" || fail "prepare hook failed"
    [ -s "$work/prep.out" ] && fail "prepare hook printed XML"
    # the refusals left no job behind
    [ "$("$ctl" list | grep -c '<job ')" = 0 ] || fail "a refused offer left a job"
    touch "$shared/done-b"
}

case_kill() {
    start_helper main "$VRM_HELPER_SOCKET"
    if [ "$host" = a ]; then
        source_jobs 1 1 512M 0 && fail "the stream survived the killed engine"
        id=$(cat "$work/web1.id")
        wait_state "$id" failed 90 || fail "job $id is not failed on the source"
        say "source job: $("$ctl" query "$id" | grep -E '<job |<error')"
    else
        (dest_jobs 1 1 512M 0 > "$work/dest.log" 2>&1; echo $? > "$work/dest.rc") &
        wait_for "$shared/web1.ready" 120
        id=$("$ctl" query-domain web1 | grep -o '<job id="[0-9]*"' | grep -o '[0-9]*')
        wait_state "$id" transferring 60 || fail "job $id never transferred"
        pid=$(sed -n 's/^pid=//p' "$work/state-main/job-$id.run")
        say "killing engine $pid of job $id"
        kill -9 "$pid"
        wait_state "$id" failed 30 || fail "job $id is not failed on the destination"
        say "destination job: $("$ctl" query "$id" | grep -E '<job |<error')"
        for _ in $(seq 600); do [ -e "$work/dest.rc" ] && break; sleep 0.2; done
        cat "$work/dest.log"
    fi
}

# Stop the helper while job 1 transfers, start it again
restart_helper() {
    local pid
    for _ in $(seq 600); do
        [ "$(job_attr 1 state 2>/dev/null)" = transferring ] && break
        sleep 0.1
    done
    pid=$(cat "$work/helper-main.pid")
    kill -TERM "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && fail "virt-rdmad did not stop"
    say "helper stopped during the transfer (job 1: $(sed -n 's/^pid=/engine pid /p' "$work/state-main/job-1.run"))"
    sleep 1
    start_helper main "$VRM_HELPER_SOCKET"
    say "helper restarted; job 1: $(job_attr 1 state)"
}

case_restart() {
    start_helper main "$VRM_HELPER_SOCKET"
    if [ "$host" = a ]; then
        restart_helper > "$work/restart.log" 2>&1 &
        rpid=$!
        # Long enough (tens of seconds on rxe) that the engine is still
        # running when the helper comes back.
        source_jobs 1 1 200M 1M || fail "streams"
        wait "$rpid"
        cat "$work/restart.log"
        grep -q "found its engine again" "$work/helper-main.log" ||
            fail "the restarted helper did not find the engine"
        grep "found its engine again" "$work/helper-main.log"
    else
        dest_jobs 1 1 200M 1M || fail "streams"
    fi
    check_completed 1
}

case "$case" in
    roundtrip|four|refusals|kill|restart) "case_$case" ;;
    *) fail "unknown case $case" ;;
esac
say "ok"
exit 0
