#!/bin/bash
# negotiation.sh SCENARIO: the helpers negotiate every RDMA migration over
# their own TLS channel (issue 11); libvirt clients only point the
# migration URI at the domain's per-domain path. Host a drives, host b
# runs what a asks (remote). Every migration ends with the guest's own
# memory check on the host it lands on, RDMA bytes >= memory processed,
# no token in any domain XML of either host (live, persistent, read-only,
# during and after), and nothing left behind.
#
#   migrations  a->b plain `virsh migrate --migrateuri unix://...` (one
#               channel), b->a `virt-rdma migrate --parallel 4 --tls
#               --timeout 20`, a->b
#               libvirt-python migrateToURI3 (parallel 4), b->a plain virsh
#               --parallel 4 --rdma-pin-all (pin-all from virsh's flag),
#               a->b plain virsh --postcopy --tls (switched by virsh
#               migrate-postcopy), b->a virt-rdma migrate --postcopy
#               --timeout 5 --timeout-postcopy (pre-copy capped below the
#               guest's dirty rate in both; a tap on the wire finds the
#               guest's plaintext in the first migration and not in the
#               two with TLS), then the storage steps below (9 and 10),
#               then the refusals below (step 12, in the same boot);
#               one migration proves several things where it can (CI
#               time); migrations-no-tls is the same without TLS (by hand:
#               a quicker run);
#               migrations-compat is steps 1, 11 and 13a (the compat
#               suite in CI, Debian 13: one channel; step 11: b->a
#               virt-rdma migrate --postcopy as in step 6, with the check
#               that the RDMA job carried QEMU's postcopy-preempt channel
#               if libvirt turned it on; 13a: the transparent mode's first
#               migration, a->b plain virsh --postcopy with no
#               --migrateuri; the rest runs with compat-matrix: CI time)
#   storage     disks that are not shared (issue 17): a guest that keeps
#               writing its IDE disk hda and has a second one, hdb; a->b
#               plain virsh --copy-storage-all --disks-uri "$(virt-rdma
#               uri --disks g2)" --suspend (the guest stays paused on b:
#               a's images and b's are compared byte for byte, then it
#               runs and verifies its disk and memory), b->a virt-rdma
#               migrate --copy-storage-inc
#               --copy-storage-synchronous-writes --migrate-disks hda,hdb
#               --suspend (the same comparison, then the guest verifies
#               both on a); each job carries two disk channels
#   refusals    helper channel with another cluster key; a peer asking for
#               a domain that runs but is not migrating; destination helper
#               down; source helper down; a migration aborted mid-way; the
#               source helper restarted mid-migration (it follows its
#               engine again; both engines' chunk digests show the stream
#               crossed unchanged) -- each refusal one line from virsh migrate,
#               the guest still running on a, nothing left behind
set -u
. "$(dirname "$0")/e2e-lib.sh"
scenario=$1
virt_rdma=$VRM_BUILD_DIR/tools/cli/virt-rdma
dest_b=qemu+tcp://198.18.0.2/system
dest_a=qemu+tcp://198.18.0.1/system
export PATH=$VRM_BUILD_DIR/tools/cli:$VRM_BUILD_DIR/tests/helper:$PATH

# xml_watch FILE: every 0.3 s until $SHARED/xml-stop exists, g1's live XML
# as a read-only client sees it (what `virsh -r dumpxml g1` prints),
# appended to FILE. One libvirt-python process on one read-only
# connection: a virsh process every 0.3 s kept the sandbox host's only
# emulated CPU busy and slowed the migration it watched by seconds.
xml_watch() {
    /usr/bin/python3 - "$1" "$SHARED/xml-stop" <<'PY'
import os, sys, time, libvirt
libvirt.registerErrorHandler(lambda ctx, err: None, None)
out, stop = sys.argv[1:]
conn = libvirt.openReadOnly("qemu:///system")
with open(out, "a") as f:
    while not os.path.exists(stop):
        try:
            xml = conn.lookupByName("g1").XMLDesc(0)
            f.write(xml if xml.endswith("\n") else xml + "\n")
            f.flush()
        except libvirt.libvirtError:
            pass  # g1 is not (or no longer) here
        time.sleep(0.3)
PY
}

# xml_now: g1's XML as it is now on this host, live read-only, live with
# its secure parts and persistent (what `virsh -r dumpxml`, `virsh dumpxml
# --security-info` and `virsh dumpxml --inactive` print), from one
# libvirt-python process: three virsh processes per host took seconds of
# the host's only emulated CPU after every migration (CI time)
xml_now() {
    /usr/bin/python3 - <<'PY'
import sys, libvirt
libvirt.registerErrorHandler(lambda ctx, err: None, None)
for conn, flags in ((libvirt.openReadOnly("qemu:///system"), 0),
                    (libvirt.open("qemu:///system"), libvirt.VIR_DOMAIN_XML_SECURE),
                    (libvirt.open("qemu:///system"), libvirt.VIR_DOMAIN_XML_INACTIVE)):
    try:
        xml = conn.lookupByName("g1").XMLDesc(flags)
        sys.stdout.write(xml if xml.endswith("\n") else xml + "\n")
    except libvirt.libvirtError:
        pass  # g1 is not (or no longer) here
PY
}

# cgroups as on a host that systemd booted, for the transparent mode's
# rules (QEMU's cgroup, libvirt's daemon's); the Debian 13 compat entry
# keeps the sandbox's plain setup
case "$scenario" in
migrations|migrations-no-tls|transparent) use_cgroups ;;
esac

# ---- host b: services, then whatever host a asks ---------------------------
[ "$VRM_SANDBOX_HOST" = b ] && serve_as_b

# ---- helpers of host a -----------------------------------------------------

# XML watchers: every 0.3 s, the read-only live XML on both hosts (xml_watch)
start_xml_watch() {
    rm -f "$SHARED/xml-stop"
    xml_watch "$SHARED/xml-watch-a" &
    XML_WATCH=$!
    remote "xml_watch \$SHARED/xml-watch-b > /dev/null 2>&1 &"
}

stop_xml_watch() {
    touch "$SHARED/xml-stop"
    wait "$XML_WATCH" 2>/dev/null
    nap 0.5
}

# no_token: the tokens of every job either helper made appear in no
# domain XML: the watched ones and the current ones (live, read-only,
# persistent) of both hosts
no_token() {
    local tokens=$SHARED/all-tokens dumps=$SHARED/xml-now
    cat "$SHARED"/tokens-a/*.token "$SHARED"/tokens-b/*.token 2>/dev/null | sort -u > "$tokens"
    [ -s "$tokens" ] || fail "no token was recorded: the test cannot look for it"
    xml_now > "$dumps" 2>/dev/null
    remote xml_now >> "$dumps" 2>/dev/null
    cat "$SHARED"/xml-watch-a "$SHARED"/xml-watch-b >> "$dumps" 2>/dev/null
    if grep -F -f "$tokens" "$dumps"; then
        fail "a token is in a domain XML"
    fi
    grep -q "<offer\|<answer" "$dumps" && fail "an offer or an answer is in a domain XML"
    say "no-token grep: $(wc -l < "$tokens") token(s) looked for in $(grep -c '<domain' "$dumps") domain XML dumps of both hosts (during and after): none found"
}

# tcp_tap_start / tcp_tap_check WHAT: in the transparent mode, libvirt's
# migration ports (49152-49215) on this (source) host's wire carry under
# 1 % of the memory libvirt moved (/tmp/jobinfo.txt, arrived_on_b): the
# rest went over RDMA. The tap keeps 96 bytes of each packet and counts
# the packets' lengths on the wire.
tcp_tap_start() {
    local ifc deadline=$((SECONDS + 20))
    ifc=$(ip -o -4 addr show | awk -v a="$VRM_SELF_ADDR" 'index($4, a "/") == 1 { print $2 }')
    [ -n "$ifc" ] || fail "no interface has $VRM_SELF_ADDR"
    rm -f /tmp/tcp-tap.pcap /tmp/tcp-tap.err
    tcpdump -i "$ifc" -n -s 96 -U -w /tmp/tcp-tap.pcap tcp portrange 49152-49215 2>/tmp/tcp-tap.err &
    tcp_tap_pid=$!
    until grep -q "listening on" /tmp/tcp-tap.err 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { cat /tmp/tcp-tap.err; fail "tcpdump did not start on $ifc"; }
        nap 0.2
    done
}

tcp_tap_check() {
    # wire_capture_stop may have stopped it (pkill tcpdump): -U wrote
    # every packet as it came
    kill -INT "$tcp_tap_pid" 2>/dev/null
    wait "$tcp_tap_pid"
    /usr/bin/python3 - "$1" <<'PY' || fail "$1: libvirt's TCP port carried the migration"
import re, struct, sys
data = open("/tmp/tcp-tap.pcap", "rb").read()
off, packets, wire = 24, 0, 0
while off + 16 <= len(data):
    incl, orig = struct.unpack_from("<II", data, off + 8)
    packets, wire, off = packets + 1, wire + orig, off + 16 + incl
jobinfo = open("/tmp/jobinfo.txt").read()
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
m = re.search(r"^Memory processed:\s+([\d.]+) (\w+)", jobinfo, re.M)
mem = float(m.group(1)) * units[m.group(2)]
print("%s: libvirt's migration ports on the wire: %d packets, %d bytes, %.3f %% of the %.0f bytes libvirt moved"
      % (sys.argv[1], packets, wire, 100.0 * wire / mem, mem))
sys.exit(0 if wire < mem / 100 else 1)
PY
}

# arrived_on_b WHAT CHANNELS [SLACK]: g1 left a (shut off, persistent) and
# arrived on b intact, through an RDMA job of CHANNELS channels. CHANNELS
# is a regex (QEMU 10 opens a second connection in post-copy); SLACK as for
# rdma_vs_memory
arrived_on_b() {
    local what=$1 channels=$2 slack=${3:-0}
    [ "$(virsh domstate g1)" = "shut off" ] || fail "after $what g1 is '$(virsh domstate g1)' on a"
    virt-rdma jobinfo --completed g1 > /tmp/jobinfo.txt || fail "virt-rdma jobinfo --completed failed on a"
    grep -E "^(Memory processed|RDMA (job|bytes sent|channels|engine CPU)):" /tmp/jobinfo.txt | sed 's/^/  [a] /'
    rdma_vs_memory "$what (source a)" "$slack"
    grep -qE "^RDMA channels: +$channels *$" /tmp/jobinfo.txt ||
        fail "the RDMA job did not carry $channels channel(s)"
    remote "check_arrived g1" || fail "g1 did not arrive on b intact"
    remote "virt-rdma jobinfo g1 | grep -E '^RDMA (job|bytes received)'" || fail "no RDMA job of g1 on b"
    remote "wait_locator g1 sandbox-b" || fail "g1 on b does not carry b's locator"
}

arrived_on_a() {
    local what=$1 channels=$2 slack=${3:-0}
    check_arrived g1
    wait_locator g1 sandbox-a
    remote "[ \"\$(virsh domstate g1)\" = 'shut off' ] && virt-rdma jobinfo --completed g1 > /tmp/jobinfo.txt && grep -E '^(Memory processed|RDMA (job|bytes sent|channels|engine CPU)):' /tmp/jobinfo.txt && rdma_vs_memory '$what (source b)' $slack && grep -qE '^RDMA channels: +$channels *\$' /tmp/jobinfo.txt" ||
        fail "$what: the source b's job is not what it should be"
    virt-rdma jobinfo g1 | grep -E '^RDMA (job|bytes received)' || fail "no RDMA job of g1 on a"
}

# ---- disks that are not shared (issue 17) ----------------------------------
storage_steps() {
    local disks mig sum_a sum_b w0 w1
    # and a second disk, hdb (16 MiB of random bytes, nothing writes it):
    # two NBD connections, two disk channels of one RDMA job
    disk_image g2 random && disk_image g2-data random 16 || fail "cannot make the disk images on a"
    remote "disk_image g2 empty && disk_image g2-data empty 16" || fail "cannot make the empty disk images on b"
    define_disk_guest g2 32 "dirty_kb=512" g2-data
    enable_rdma g2
    disks=$(virt-rdma uri --disks g2) || fail "virt-rdma uri --disks failed"
    [ "$disks" = "unix:///run/virt-rdma/qemu/$(virsh domuuid g2)/nbd.sock" ] ||
        fail "virt-rdma uri --disks printed '$disks'"

    # 9. a -> b: plain virsh, the disk copied over RDMA while the guest
    #    writes it; --suspend: on b the guest stays paused where it left a
    mig=$(virt-rdma uri g2) || fail "virt-rdma uri g2 failed"
    w0=$(disk_writes g2)
    say "virsh migrate --live --p2p --persistent --copy-storage-all --suspend --migrateuri $mig --disks-uri $disks g2 $dest_b"
    timed virsh migrate --live --p2p --persistent --copy-storage-all --suspend \
        --migrateuri "$mig" --disks-uri "$disks" g2 "$dest_b" ||
        fail "virsh migrate --copy-storage-all a->b failed"
    [ "$(virsh domstate g2)" = "shut off" ] || fail "after the copy g2 is '$(virsh domstate g2)' on a"
    # the guest's last report on a, from the pre-copy's end
    w1=$(disk_writes g2)
    say "the guest wrote $((w1 - w0)) sectors on a while its disk was copied (writes $w0 -> $w1)"
    [ "$w1" -gt "$w0" ] || fail "the guest did not write its disk during the copy"
    virt-rdma jobinfo --completed g2 > /tmp/jobinfo.txt || fail "virt-rdma jobinfo --completed g2 failed on a"
    grep -E "^(Memory processed|File processed|Disk|RDMA (job|bytes sent|channels)):" /tmp/jobinfo.txt | sed 's/^/  [a] /'
    engine_record_disks 2 $((80 << 20)) | sed 's/^/  [a] /'; [ "${PIPESTATUS[0]}" = 0 ] ||
        fail "a's engine did not carry the disks (two disk connections, more than the 80 MiB of images sent)"
    sum_a=$(disk_sum g2 g2-data)
    sum_b=$(remote "[ \"\$(virsh domstate g2)\" = paused ] && disk_sum g2 g2-data") ||
        fail "g2 is not paused on b after --suspend"
    sum_b=${sum_b#  \[b\] }
    say "disk images' SHA-256 (hda hdb): a $sum_a, b $sum_b"
    [ -n "$sum_a" ] && [ "$sum_a" = "$sum_b" ] || fail "b's disk images are not a's"
    remote "virsh -q resume g2 && check_arrived g2 && wait_disk_verifies g2 2" ||
        fail "g2 did not verify its disk and memory on b"
    leftovers_both

    # 10. b -> a: virt-rdma migrate, the disk named (--migrate-disks) and
    #     copied with --copy-storage-inc (a raw image has no backing file:
    #     all of it is the top layer) in libvirt's write-blocking mode
    #     (--copy-storage-synchronous-writes: the guest's writes wait for
    #     the copy), paused on a for the comparison
    timed remote "virt-rdma migrate --live --p2p --persistent --copy-storage-inc --copy-storage-synchronous-writes --migrate-disks hda,hdb --suspend g2 $dest_a" ||
        fail "virt-rdma migrate --copy-storage-inc --copy-storage-synchronous-writes --migrate-disks hda,hdb b->a failed"
    [ "$(virsh domstate g2)" = paused ] || fail "g2 is '$(virsh domstate g2)' on a after --suspend, not paused"
    sum_b=$(remote "[ \"\$(virsh domstate g2)\" = 'shut off' ] && disk_sum g2 g2-data") ||
        fail "g2 is not shut off on b after the migration"
    sum_b=${sum_b#  \[b\] }
    sum_a=$(disk_sum g2 g2-data)
    say "disk images' SHA-256 (hda hdb): b $sum_b, a $sum_a"
    [ -n "$sum_a" ] && [ "$sum_a" = "$sum_b" ] || fail "a's disk images are not b's"
    virsh -q resume g2 || fail "cannot resume g2 on a"
    check_arrived g2
    wait_disk_verifies g2 2
    remote "engine_record_disks 2 0" ||
        fail "b's engine did not carry the two disks"
    leftovers_both
    virsh -q destroy g2 > /dev/null
    virsh -q undefine g2 > /dev/null
}

# ---- refusals, an abort and a helper restart --------------------------------
# refusal_steps: with g1 running on a and not defined on b. From here on,
# the helpers each host (re)starts have their engines log at debug level,
# so that the migration across a helper restart is checked chunk by chunk
# (stream_intact): b's helper restarts in refusals 1 and 3, a's in 4.
refusal_steps() {
    local records_before
    helper_log_debug
    remote helper_log_debug
    # refused LABEL EXPECTED ARGS...: virsh migrate ARGS fails with one line
    # naming EXPECTED; the guest still runs on a, nothing is left behind
    refused() {
        local label=$1 want=$2 out
        shift 2
        out=$(virsh migrate "$@" 2>&1) && fail "$label: virsh migrate succeeded"
        say "$label: virsh migrate: $out"
        [ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "$label: the error is not one line"
        grep -qF "$want" <<<"$out" || fail "$label: the error does not say '$want'"
        [ "$(virsh domstate g1)" = running ] || fail "$label: g1 is not running on a"
        remote "! virsh -q list --all --name | grep -qx g1" || fail "$label: g1 exists on b"
        leftovers_both
    }
    migrate_args=(--live --p2p --persistent --migrateuri "$uri" g1 "$dest_b")

    # 1. the destination's helper has another cluster key
    remote "stop_helper; cluster_key other; run_helper" || fail "cannot restart b's helper with another key"
    refused "wrong credentials" "the TLS handshake with the virt-rdma helper at 198.18.0.1:16530 failed" "${migrate_args[@]}"
    grep -F "uses another cluster key" /tmp/virt-rdmad.log | tail -1 | sed 's/^/  [a log] /'
    grep -qF "uses another cluster key" /tmp/virt-rdmad.log || fail "a did not log the wrong key"
    remote "stop_helper; cluster_key; run_helper" || fail "cannot restart b's helper"

    # 2. a peer asks for a domain that runs here but is not migrating
    records_before=$(ls /var/lib/virt-rdma/job-*.xml 2>/dev/null | wc -l)
    out=$(remote "vrmhelperctl peer-request /etc/virt-rdma/cluster.key 198.18.0.1 16530 g1 $uuid 198.18.0.2") &&
        fail "a's helper offered a domain that is not migrating"
    grep -qF "refused: the domain 'g1' runs on sandbox-a but is not migrating out of it" <<<"$out" ||
        fail "the refusal does not say why: $out"
    say "not migrating: $out"
    grep -F "refused the request of the peer helper at 198.18.0.2" /tmp/virt-rdmad.log | tail -1 | sed 's/^/  [a log] /'
    [ "$(ls /var/lib/virt-rdma/job-*.xml 2>/dev/null | wc -l)" = "$records_before" ] ||
        fail "a refused request left a job record"
    # 2b. a holder of the cluster key on b that names another helper (a's
    #     own address) is refused as an impostor (issue 33 item 1)
    out=$(remote "vrmhelperctl peer-request /etc/virt-rdma/cluster.key 198.18.0.1 16530 g1 $uuid 198.18.0.2 198.18.0.1") &&
        fail "a's helper answered a request that named another helper"
    grep -qF "refused: the request names the helper at 198.18.0.1 but comes from 198.18.0.2: a helper may ask only as itself" <<<"$out" ||
        fail "the impostor's refusal does not say why: $out"
    say "impostor: $out"
    leftovers_both

    # 3. the destination's helper is down
    remote stop_helper || fail "cannot stop b's helper"
    refused "destination helper down" "the virt-rdma helper (virt-rdmad) is not running on this host" "${migrate_args[@]}"

    # 3b. the same under the default policy ([migration] fallback = tcp),
    #     over libvirt's own TCP with no --migrateuri (what Nova, oVirt and
    #     virt-manager do; issue 32): b's hook lets libvirt go on and says
    #     why in b's syslog, and the guest arrives intact; once b's helper
    #     is back, it carries the guest home over RDMA
    remote "sed -i 's/^fallback=refuse\$/fallback=tcp/' /etc/virt-rdma/virt-rdmad.conf && syslog_tap_start" ||
        fail "cannot set b's fallback to tcp"
    out=$(virsh migrate --live --p2p --persistent g1 "$dest_b" 2>&1) ||
        fail "fallback: virsh migrate over TCP failed with b's helper down: $out"
    say "fallback: virsh migrate --live --p2p --persistent g1 $dest_b (no --migrateuri) with b's helper down: done"
    remote "check_arrived g1" || fail "fallback: g1 did not arrive on b intact"
    remote "syslog_tap_stop; grep -F 'g1 migrates in over TCP, not RDMA ([migration] fallback = tcp): the virt-rdma helper (virt-rdmad) is not running on this host' /tmp/syslog-tap.txt" ||
        fail "fallback: b's hook logged no warning line to syslog"
    remote "sed -i 's/^fallback=tcp\$/fallback=refuse/' /etc/virt-rdma/virt-rdmad.conf; run_helper; wait_locator g1 sandbox-b" ||
        fail "fallback: b's helper did not come back and mark g1"
    # a's job events as they happen (virt-rdma events, issue 35): one JSON
    # line per change of state, read by a JSON parser below
    virt-rdma events --loop --json --timeout 300 > /tmp/events.json 2> /tmp/events.err &
    events_pid=$!
    remote "virsh migrate --live --p2p --persistent --migrateuri '$uri' g1 qemu+tcp://198.18.0.1/system" ||
        fail "fallback: g1 did not go home to a over RDMA"
    arrived_on_a "fallback: g1 home b->a over RDMA" 1
    deadline=$((SECONDS + 30))
    until grep -q '"state":"completed"' /tmp/events.json; do
        [ $SECONDS -ge $deadline ] && { cat /tmp/events.err; fail "virt-rdma events printed no completed job"; }
        nap 0.2
    done
    kill "$events_pid"; wait "$events_pid" 2>/dev/null
    python3 -c '
import json, sys
events = [json.loads(line) for line in open("/tmp/events.json")]
states = [e["job"]["state"] for e in events if e["job"]["domain"] == "g1"]
assert all(e["format-version"] == 1 and e["event"] == "job-state" for e in events), events
order = ["negotiating", "connected", "transferring", "completed"]
steps = [order.index(s) for s in states]
assert len(states) >= 2 and states[-1] == "completed" and steps == sorted(steps), states
assert events[-1]["job"]["direction"] == "in" and events[-1]["job"]["final"], events[-1]
print("  [a] virt-rdma events: g1 in: " + " -> ".join(states))
' || fail "virt-rdma events did not show g1's job arriving: $(cat /tmp/events.json)"
    # the fleet's view of it: virt-rdma jobs, its JSON read by a JSON parser
    virt-rdma jobs --all | sed -n '1p;$p' | sed 's/^/  [a] /'
    virt-rdma jobs --all --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["format-version"] == 1, j
last = j["jobs"][-1]
assert (last["domain"], last["direction"], last["state"], last["final"]) == ("g1", "in", "completed", True), last
assert last["bytes"] > 16 << 20 and last["reason"] is None, last
' || fail "virt-rdma jobs --json does not show the completed incoming job of g1"
    remote "virsh -q undefine g1 > /dev/null" || fail "fallback: cannot undefine g1 on b"
    leftovers_both

    # 4. the source's helper is down
    stop_helper
    refused "source helper down" "cannot reach the virt-rdma helper at 198.18.0.1:16530" "${migrate_args[@]}"
    run_helper
    wait_locator g1 sandbox-a

    # 5. a migration aborted half-way: engines end on both hosts
    virsh migrate --live --p2p --persistent --bandwidth 2 --migrateuri "$uri" g1 "$dest_b" > /tmp/abort.out 2>&1 &
    mpid=$!
    wait_data_moved g1 || fail "the migration to abort never moved data"
    say "aborting the migration with virsh domjobabort"
    virsh domjobabort g1 || fail "virsh domjobabort failed"
    wait "$mpid" && fail "the aborted migration succeeded"
    say "aborted: virsh migrate: $(cat /tmp/abort.out)"
    [ "$(virsh domstate g1)" = running ] || fail "g1 is not running on a after the abort"
    leftovers_both
    virt-rdma jobinfo g1 | grep -E "^RDMA (job|error):" || fail "no RDMA job of the aborted migration on a"

    # 6. the source's helper restarts in the middle of a migration: it
    #    follows its engine again and the migration completes (2 MiB/s
    #    until then: the first pass of the 32 MiB guest takes 16 s, the
    #    restart about 3)
    virsh migrate --live --p2p --persistent --bandwidth 2 --migrateuri "$uri" g1 "$dest_b" > /tmp/restart.out 2>&1 &
    mpid=$!
    wait_data_moved g1 || fail "the migration never moved data"
    say "restarting a's virt-rdmad mid-migration"
    stop_helper
    run_helper
    grep -F "following its engine again" /tmp/virt-rdmad.log | tail -1 | sed 's/^/  [a log] /'
    grep -qF "following its engine again" /tmp/virt-rdmad.log || fail "the restarted helper did not follow its engine"
    # the cap only had to keep the migration running until then (at 2 MiB/s
    # the guest's 2 MiB dirtied never converge)
    lift_cap g1 "$mpid" || fail "the migration must go on at full speed"
    deadline=$((SECONDS + 120))
    while kill -0 "$mpid" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { virsh domjobinfo g1; fail "the migration did not end within 120 s of the helper's restart"; }
        nap 0.3
    done
    wait "$mpid" || { cat /tmp/restart.out; fail "the migration failed across the helper's restart"; }
    stream_intact "virsh a->b across a helper restart"
    arrived_on_b "virsh a->b across a helper restart" 1
    no_token
    leftovers_both
}

# ---- host a ----------------------------------------------------------------
start_virt_rdma
start_libvirt
# 32 MiB: under the sandbox's emulation each MiB costs about a quarter of
# a second of migration and of the guest's verification, and the steps
# test the negotiation and the transport, not the size (the benchmark and
# the compat entries migrate 128 MiB); its 2 MiB dirtied still outrun the
# caps of the post-copy steps (0.5 s to send at 4 MiB/s, above the 300 ms
# downtime), but QEMU may converge while the guest verifies its RAM: step 5
# switches in the first pass (1 MiB/s), step 6 after 5 s (at 4 MiB/s, a
# first pass takes 8 s). Step 11 (compat) keeps 64 MiB: it
# needs 24 MiB or more left for post-copy after 25 s at 2 MiB/s (below).
case "$scenario" in
migrations-compat) define_guest g1 64 "dirty_kb=2048" ;;
*) define_guest g1 32 "dirty_kb=2048" ;;
esac
enable_rdma g1
wait_flag ready-b 180
uri=$(virt-rdma uri g1) || fail "virt-rdma uri failed"
uuid=$(virsh domuuid g1)
[ "$uri" = "unix:///run/virt-rdma/qemu/$uuid/migrate.sock" ] || fail "virt-rdma uri printed '$uri'"
say "virt-rdma uri g1: $uri"

# the numbered steps of the scenario (the header above); a step not in the
# list is left out, and the guest goes on from wherever the last one left it
# (steps 2 and 5 with QEMU's TLS in "migrations")
tls=0
case "$scenario" in
migrations) steps="1 2 3 4 5 6 13 9 10 12"; tls=1 ;;
migrations-no-tls) steps="1 2 3 4 5 6 13 9 10 12" ;;
migrations-compat) steps="1 11 13a" ;;
transparent) steps="13"; tls=1 ;;
*) steps= ;;
esac
step() { [[ " $steps " == *" $1 "* ]]; }
tls_steps() { [ "$tls" = 1 ]; }
case "$scenario" in
migrations|migrations-no-tls|migrations-compat|transparent)
    if tls_steps; then
        migration_tls_pki
        remote migration_tls_pki || fail "host b has no migration TLS certificates"
    fi

    if step 1; then
        # 1. a -> b: plain virsh, one channel; the wire tap's control (steps
        #    2 and 5): without TLS the guest's plaintext is on the wire
        start_xml_watch
        tls_steps && wire_capture_start
        say "virsh migrate --live --p2p --persistent --migrateuri $uri g1 $dest_b"
        timed virsh migrate --live --p2p --persistent --migrateuri "$uri" g1 "$dest_b" ||
            fail "plain virsh migrate failed"
        tls_steps && wire_capture_stop
        stop_xml_watch
        arrived_on_b "virsh a->b" 1
        tls_steps && plaintext_check "virsh a->b (clear text)" clear
        no_token
        leftovers_both
    fi

    if step 2; then
        # 2. b -> a: virt-rdma migrate, parallel 4, with QEMU's TLS (issue
        #    17): the certificate name checked is the host of the
        #    destination URI (198.18.0.1), which virt-rdma passes as
        #    --tls-destination since the domain's socket names no host; a
        #    tap on b's wire finds the guest's plaintext in none of the
        #    RoCE packets of the five connections. --timeout 20 suspends
        #    the guest then, as virsh's does: QEMU's TLS on the sandbox's
        #    one emulated CPU runs below the guest's dirty rate, and without
        #    it the migration took 110 s and 142 MiB to converge (CI time)
        start_xml_watch
        tls_opt=
        if tls_steps; then
            tls_opt=--tls
            remote wire_capture_start || fail "cannot tap b's wire"
        fi
        timed remote "virt-rdma migrate --live --p2p --persistent --parallel --parallel-connections 4 --timeout 20 $tls_opt g1 $dest_a" ||
            fail "virt-rdma migrate $tls_opt b->a failed"
        tls_steps && remote wire_capture_stop
        stop_xml_watch
        arrived_on_a "virt-rdma migrate $tls_opt b->a" 5
        if tls_steps; then
            remote "plaintext_check 'virt-rdma migrate --tls b->a' tls" ||
                fail "b->a: the guest's memory crossed the wire in clear text"
        fi
        no_token
        leftovers_both
    fi

    if step 3; then
        # 3. a -> b: libvirt-python, as a management application, parallel 4
        start_xml_watch
        say "libvirt-python: dom.migrateToURI3('$dest_b', {'migrate_uri': '$uri', 'parallel.connections': 4}, LIVE|PEER2PEER|PERSIST_DEST|PARALLEL)"
        timed /usr/bin/python3 - "$dest_b" "$uri" <<'PY' || fail "libvirt-python migrateToURI3 failed"
import sys, libvirt
conn = libvirt.open("qemu:///system")
dom = conn.lookupByName("g1")
flags = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER |
         libvirt.VIR_MIGRATE_PERSIST_DEST | libvirt.VIR_MIGRATE_PARALLEL)
dom.migrateToURI3(sys.argv[1], {libvirt.VIR_MIGRATE_PARAM_URI: sys.argv[2],
                                libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS: 4}, flags)
print("migrateToURI3 returned")
PY
        stop_xml_watch
        arrived_on_b "libvirt-python a->b" 5
        no_token
        leftovers_both
    fi

    if step 4; then
        # 4. b -> a: plain virsh, parallel 4, pin-all from virsh's own flag
        start_xml_watch
        timed remote "virsh migrate --live --p2p --persistent --parallel --parallel-connections 4 --rdma-pin-all --migrateuri $uri g1 $dest_a" ||
            fail "virsh migrate --rdma-pin-all b->a failed"
        stop_xml_watch
        arrived_on_a "virsh --rdma-pin-all b->a" 5
        remote "grep -l 'capabilities=\"0x0000000[13]\"' \$(ls -t /var/lib/virt-rdma/job-*.xml | head -1)" ||
            fail "the pin-all flag of virsh did not reach the offer"
        # and what the engines agreed reaches jobinfo (issue 38)
        remote "grep -qE '^RDMA capabilities: +pin-all' /tmp/jobinfo.txt" ||
            fail "virt-rdma jobinfo on b does not show pin-all: $(remote 'grep ^RDMA /tmp/jobinfo.txt')"
        no_token
        leftovers_both
    fi

    if step 5; then
        # 5. a -> b: plain virsh with postcopy (issue 17), and with QEMU's
        # TLS in "migrations". Pre-copy is capped at 1 MiB/s, so that it
        # is still in its first pass when it is switched: the guest's 2 MiB
        # dirtied outrun that, but QEMU converges while the guest verifies
        # its RAM, which it does after every sweep (a run at 4 MiB/s
        # completed before the switch on a slow host). While it runs,
        # QEMU's TLS parameters are read; then `virsh migrate-postcopy`
        # switches (post-copy is not capped). The guest then runs on b and its page
        # requests travel b -> a over the same RDMA channel. The engines
        # must carry ciphertext: a tap on a's wire finds the guest's
        # plaintext in none of the RoCE packets (step 1 found it thousands
        # of times).
        tls_opt=()
        tls_steps && tls_opt=(--tls --tls-destination sandbox-b)
        virsh event --domain g1 --event lifecycle --loop --timeout 300 > /tmp/events-g1 2>&1 &
        events=$!
        nap 1
        tls_steps && wire_capture_start
        say "virsh migrate --live --p2p --persistent --postcopy ${tls_opt[*]} --bandwidth 1 --migrateuri $uri g1 $dest_b; then virsh migrate-postcopy g1"
        virsh migrate --live --p2p --persistent --postcopy "${tls_opt[@]}" --bandwidth 1 \
            --migrateuri "$uri" g1 "$dest_b" > /tmp/postcopy.out 2>&1 &
        mpid=$!
        wait_data_moved g1 || fail "the migration a->b never moved data"
        if tls_steps; then
            virsh qemu-monitor-command g1 '{"execute":"query-migrate-parameters"}' |
                /usr/bin/python3 -c 'import json, sys; p = json.load(sys.stdin)["return"]; print("QEMU migration parameters: tls-creds %r, tls-hostname %r" % (p.get("tls-creds"), p.get("tls-hostname"))); sys.exit(0 if p.get("tls-creds") and p.get("tls-hostname") == "sandbox-b" else 1)' ||
                fail "QEMU migrates without TLS credentials or with another TLS host name"
        fi
        timed virsh migrate-postcopy g1 || fail "virsh migrate-postcopy failed"
        wait "$mpid" || { cat /tmp/postcopy.out; fail "virsh migrate --postcopy ${tls_opt[*]} a->b failed"; }
        tls_steps && wire_capture_stop
        kill "$events" 2>/dev/null; wait "$events" 2>/dev/null
        sed 's/^/  [a] /' /tmp/events-g1
        grep -q "Post-copy" /tmp/events-g1 || fail "g1 never entered post-copy on a (libvirt's events above)"
        # QEMU 10 (Debian 13) opens a second connection for post-copy and counts
        # in "memory processed" a few KiB more than crossed its streams (10 KiB
        # of 124.6 MiB measured); the guest's own check proves the memory
        arrived_on_b "virsh --postcopy ${tls_opt[*]} a->b" "(1|2)" 1048576
        grep -E "^(Postcopy requests|RDMA bytes received):" /tmp/jobinfo.txt | sed 's/^/  [a] /'
        tls_steps && plaintext_check "virsh --postcopy --tls a->b" tls
        leftovers_both
    fi

    if step 6; then
        # 6. b -> a: virt-rdma migrate --postcopy, switched by virt-rdma itself
        #    when pre-copy has run for 5 s (--timeout 5 --timeout-postcopy, as
        #    virsh does it)
        timed remote "virt-rdma migrate --live --p2p --persistent --postcopy --bandwidth 4 --timeout 5 --timeout-postcopy --verbose g1 $dest_a > /tmp/vm.out 2>&1; rc=\$?; tr '\\r' '\\n' < /tmp/vm.out | grep -v '^\$' | tail -4; exit \$rc" ||
            fail "virt-rdma migrate --postcopy --timeout-postcopy b->a failed"
        remote "grep -o 'migration exceeded 5 s, switching to post-copy' /tmp/vm.out" ||
            fail "virt-rdma migrate did not switch to post-copy at its --timeout"
        remote "virsh domjobinfo --completed --keep-completed g1 | grep -E '^(Postcopy requests|Memory processed):'"
        arrived_on_a "virt-rdma migrate --postcopy b->a" "(1|2)" 1048576
        leftovers_both
    fi

    if step 11; then
        # 11. b -> a: virt-rdma migrate --postcopy, switched at its --timeout
        # as in step 6, with QEMU's capabilities read on b while pre-copy
        # runs (capped at 2 MiB/s, below the guest's dirty rate, for 25 s
        # from the command's start: a CI run with 4 MiB/s and 13 s of set-up
        # had sent 48 of the 64 MiB at the switch, and post-copy ended before
        # QEMU used its preempt channel; at 2 MiB/s 24 MiB or more are left
        # for post-copy however long the set-up takes). libvirt has
        # no flag for QEMU's postcopy-preempt; it turns the capability on
        # itself where both QEMUs have it, and QEMU then opens a channel of
        # its own for the page requests. The RDMA job must have carried
        # exactly QEMU's connections: 2 with postcopy-preempt, 1 without
        rm -f "$SHARED/postcopy.rc"
        remote "( virt-rdma migrate --live --p2p --persistent --postcopy --bandwidth 2 --timeout 25 --timeout-postcopy --verbose g1 $dest_a > \$SHARED/postcopy.out 2>&1; echo \$? > \$SHARED/postcopy.rc ) > /dev/null 2>&1 &"
        say "b: virt-rdma migrate --live --p2p --persistent --postcopy --bandwidth 2 --timeout 25 --timeout-postcopy g1 $dest_a"
        remote "wait_data_moved g1 && virsh qemu-monitor-command g1 '{\"execute\":\"query-migrate-capabilities\"}' > \$SHARED/postcopy-caps.json" ||
            fail "b: the post-copy migration never moved data, or QEMU's capabilities could not be read"
        preempt=$(/usr/bin/python3 -c 'import json, sys; c = {x["capability"]: x["state"] for x in json.load(open(sys.argv[1]))["return"]}; print("on" if c.get("postcopy-preempt") else "off") if c.get("postcopy-ram") else sys.exit(1)' "$SHARED/postcopy-caps.json") ||
            fail "QEMU on b migrates without postcopy-ram"
        say "QEMU on b, as libvirt set it up: postcopy-ram on, postcopy-preempt $preempt"
        deadline=$((SECONDS + 300))
        until [ -s "$SHARED/postcopy.rc" ]; do
            [ $SECONDS -ge $deadline ] && fail "virt-rdma migrate --postcopy b->a did not end within 300 s"
            nap 0.5
        done
        tr '\r' '\n' < "$SHARED/postcopy.out" | grep -v '^$' | tail -4 | sed 's/^/  [b] /'
        [ "$(cat "$SHARED/postcopy.rc")" = 0 ] || fail "virt-rdma migrate --postcopy b->a failed"
        grep -q 'migration exceeded 25 s, switching to post-copy' "$SHARED/postcopy.out" ||
            fail "virt-rdma migrate did not switch to post-copy at its --timeout"
        remote "virsh domjobinfo --completed --keep-completed g1 | grep -E '^(Postcopy requests|Memory processed):'"
        arrived_on_a "virt-rdma migrate --postcopy b->a (postcopy-preempt $preempt)" \
            "$([ "$preempt" = on ] && echo 2 || echo 1)" 1048576
        no_token
        leftovers_both
    fi

    if step 13 || step 13a; then
        # 13. the transparent mode (issue 32): what an orchestrator does,
        #     with no per-domain path. a -> b: plain virsh with no
        #     --migrateuri (libvirt picks tcp://sandbox-b:PORT); b -> a:
        #     libvirt-python migrateToURI3 with migrate_uri tcp://HOST and
        #     parallel 4, the call OpenStack Nova makes. The source
        #     helper's nftables rule steers QEMU's TCP connections into its
        #     engine: the RDMA job carries every byte libvirt moved
        #     (arrived_on_*), and the rule is gone afterwards (leftovers)
        #     The first one is post-copy, switched while pre-copy runs
        #     (capped at 1 MiB/s, as in step 5), so the page requests
        #     travel b -> a through the steered connection; with QEMU's TLS
        #     in "migrations": the engines carry its ciphertext, and the
        #     RoCE tap finds none of the guest's plaintext (libvirt checks
        #     the certificate of sandbox-b, the host name b's libvirt gives
        #     in its URI)
        tls_opt=
        tls_steps && tls_opt=--tls
        start_xml_watch
        tcp_tap_start
        tls_steps && wire_capture_start
        say "virsh migrate --live --p2p --persistent --postcopy $tls_opt --bandwidth 1 g1 $dest_b (no --migrateuri); then virsh migrate-postcopy g1"
        # shellcheck disable=SC2086
        virsh migrate --live --p2p --persistent --postcopy $tls_opt --bandwidth 1 \
            g1 "$dest_b" > /tmp/transparent.out 2>&1 &
        mpid=$!
        wait_data_moved g1 || fail "the transparent migration a->b never moved data"
        timed virsh migrate-postcopy g1 || fail "virsh migrate-postcopy failed"
        wait "$mpid" || { cat /tmp/transparent.out; fail "plain virsh migrate --postcopy $tls_opt without --migrateuri failed"; }
        tls_steps && wire_capture_stop
        stop_xml_watch
        grep -q "QEMU's TCP connections to ports 49152-49215 steered to its engine" /tmp/virt-rdmad.log ||
            fail "a's helper did not say that it steered QEMU's TCP connections"
        virsh domjobinfo --completed --keep-completed g1 | grep -E '^(Postcopy requests|Memory processed):' |
            sed 's/^/  [a] /'
        # post-copy: as step 5 (QEMU 10 counts a few KiB more; a second
        # connection with postcopy-preempt)
        arrived_on_b "virsh --postcopy $tls_opt without --migrateuri a->b (transparent)" "(1|2)" 1048576
        tcp_tap_check "virsh --postcopy $tls_opt without --migrateuri a->b (transparent)"
        tls_steps && plaintext_check "virsh --postcopy --tls without --migrateuri a->b (transparent)" tls
        grep -E "QEMU's TCP connections .* steered|steering rules? .* removed" /tmp/virt-rdmad.log |
            tail -2 | sed 's/^/  [a] /'
        no_token
        leftovers_both
    fi
    if step 13; then
        # A connection that was open before b's rule keeps working while
        # the rule is in place, though its end on a is port 49200, in
        # libvirt's range: the rule takes only a new connection's SYN.
        # (The first redirect turns connection tracking on, which takes up
        # an open connection on its next packet as a new one going the way
        # that packet goes: without the SYN match, a packet that b sends
        # first, from root like QEMU here, was redirected to b's engine and
        # the connection broke: the CI saw it happen to the helpers' own
        # channel.) So b's end speaks first: it sends a tick every 0.2 s.
        rm -f /tmp/echo-ready /tmp/echo-stop
        remote "( /usr/bin/python3 -c 'import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"198.18.0.2\", 5599))
s.listen(1)
s.settimeout(60)
c, _ = s.accept()
try:
    while True:
        c.sendall(b\"tick\\n\")
        time.sleep(0.2)
except OSError:
    pass' > /tmp/tick-server.log 2>&1 & )" || fail "cannot start a tick server on b"
        /usr/bin/python3 - > /tmp/tick-client.out 2>&1 <<'PY' &
import os, socket, sys, time
for _ in range(50):
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        c.bind(("198.18.0.1", 49200))
        c.connect(("198.18.0.2", 5599))
        break
    except OSError:
        c.close()
        time.sleep(0.2)
else:
    sys.exit("cannot connect to b's tick server")
c.settimeout(5)
f = c.makefile("rb")
ticks = 0
open("/tmp/echo-ready", "w").close()
while not os.path.exists("/tmp/echo-stop"):
    try:
        line = f.readline()
    except OSError as e:
        sys.exit("b's ticks stopped after %d: %s" % (ticks, e))
    if line != b"tick\n":
        sys.exit("b's ticks stopped after %d: %r" % (ticks, line))
    ticks += 1
print("%d ticks from 198.18.0.2:5599 to 198.18.0.1:49200 while b's rule was in place" % ticks)
PY
        echo_pid=$!
        deadline=$((SECONDS + 20))
        until [ -e /tmp/echo-ready ]; do
            [ $SECONDS -ge $deadline ] && { cat /tmp/tick-client.out; fail "the connection to b's tick server did not open"; }
            nap 0.2
        done
        say "b: libvirt-python migrateToURI3('$dest_a', {'migrate_uri': 'tcp://198.18.0.1', 'parallel.connections': 4}, LIVE|PEER2PEER|PERSIST_DEST|PARALLEL)"
        timed remote "/usr/bin/python3 - '$dest_a' <<'PY'
import sys, libvirt
conn = libvirt.open('qemu:///system')
dom = conn.lookupByName('g1')
flags = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER |
         libvirt.VIR_MIGRATE_PERSIST_DEST | libvirt.VIR_MIGRATE_PARALLEL)
dom.migrateToURI3(sys.argv[1], {libvirt.VIR_MIGRATE_PARAM_URI: 'tcp://198.18.0.1',
                                libvirt.VIR_MIGRATE_PARAM_PARALLEL_CONNECTIONS: 4}, flags)
print('migrateToURI3 returned')
PY" || fail "libvirt-python migrateToURI3 with migrate_uri tcp://198.18.0.1 failed"
        touch /tmp/echo-stop
        wait "$echo_pid" || { cat /tmp/tick-client.out; fail "a connection open before b's rule broke while it was in place"; }
        sed 's/^/  /' /tmp/tick-client.out
        arrived_on_a "migrateToURI3 tcp://198.18.0.1 parallel 4 b->a (transparent)" 5
        leftovers_both

        # a helper killed (SIGKILL) leaves its rules behind; the next one
        # starts with an empty table
        nft add rule inet virt_rdma output meta skuid 0 tcp dport 9 redirect to :10 \
            comment '"virt-rdma job 999"' || fail "cannot add a stand-in for a stale rule"
        # but a second virt-rdmad started beside the running one ends before
        # it touches them (the stand-in stands for a running job's rule)
        if timeout 30 "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --config /etc/virt-rdma/virt-rdmad.conf \
               --engine "$VRM_BUILD_DIR/driver/virt-rdma-engine" > /tmp/second.out 2>&1; then
            fail "a second virt-rdmad started beside the running one"
        fi
        grep -q "another virt-rdmad is already serving" /tmp/second.out ||
            fail "a second virt-rdmad does not say that one runs: $(cat /tmp/second.out)"
        nft list chain inet virt_rdma output | grep -q 'virt-rdma job 999' ||
            fail "a second virt-rdmad, refused, took the running one's steering rules"
        say "a second virt-rdmad: $(tail -n 1 /tmp/second.out); the running one's rules stay"
        kill -KILL "$(cat /tmp/virt-rdmad.pid)"
        run_helper
        nft list chain inet virt_rdma output | grep -q 'virt-rdma job 999' &&
            fail "a's restarted helper kept its predecessor's steering rule"
        say "a's helper, killed and restarted: its nftables table starts empty"
        # what the unit runs after a helper that systemd killed (or that
        # crashed): the table goes
        kill -KILL "$(cat /tmp/virt-rdmad.pid)"
        stop_post=$(sed -n 's/^ExecStopPost=-//p' "$VRM_BUILD_DIR/driver/helper/virt-rdmad.service")
        [ -n "$stop_post" ] || fail "virt-rdmad.service has no ExecStopPost"
        eval "$stop_post" || fail "virt-rdmad.service's ExecStopPost failed"
        nft list table inet virt_rdma > /dev/null 2>&1 &&
            fail "virt-rdmad.service's ExecStopPost left the table inet virt_rdma"
        eval "$stop_post" || fail "virt-rdmad.service's ExecStopPost failed without the table"
        run_helper
        nft list table inet virt_rdma > /dev/null || fail "a's restarted helper made no table inet virt_rdma"
        say "the unit's ExecStopPost, after a helper killed: no table inet virt_rdma left"
        wait_locator g1 sandbox-a

        # [migration] rdma = all: a's helper, restarted with it, puts its
        # locator into the live metadata of g3, a guest made as an
        # orchestrator makes them (no <rdma:migration>), which then
        # migrates over RDMA with plain virsh. On b it opts out
        # (<rdma:migration enabled="no"> in its live metadata) and goes
        # back over libvirt's TCP untouched: no job for it on a.
        # a helper that stops cleanly takes its table with it: a migration
        # while it is down goes over libvirt's TCP, not to a dead port
        stop_helper
        nft list table inet virt_rdma > /dev/null 2>&1 &&
            fail "a's helper, stopped cleanly, left the table inet virt_rdma"
        say "a's helper, stopped cleanly: no table inet virt_rdma left"
        sed -i 's/^fallback=refuse$/fallback=refuse\nrdma=all/' /etc/virt-rdma/virt-rdmad.conf
        run_helper
        define_guest g3 64 "dirty_kb=2048"
        wait_locator g3 sandbox-a
        say "virsh migrate --live --p2p --persistent g3 $dest_b (g3 has no metadata of its own; [migration] rdma = all)"
        timed virsh migrate --live --p2p --persistent g3 "$dest_b" ||
            fail "plain virsh migrate of g3 under rdma = all failed"
        virt-rdma jobinfo --completed g3 > /tmp/jobinfo.txt || fail "no RDMA job of g3 on a"
        grep -E "^(Memory processed|RDMA (job|bytes sent|channels)):" /tmp/jobinfo.txt | sed 's/^/  [a] /'
        rdma_vs_memory "g3 under rdma = all a->b (transparent)"
        remote "check_arrived g3" || fail "g3 did not arrive on b intact"
        leftovers_both
        g3_uuid=$(virsh domuuid g3)
        jobs_before=$(grep -l "$g3_uuid" /var/lib/virt-rdma/job-*.xml | wc -l)
        remote "virsh -q metadata g3 --uri $VRM_NS --key rdma --set \"<migration enabled='no'/>\" --live" ||
            fail "cannot opt g3 out on b"
        timed remote "virsh migrate --live --p2p --persistent g3 $dest_a" ||
            fail "virsh migrate of g3 (opted out) b->a failed"
        check_arrived g3
        [ "$(grep -l "$g3_uuid" /var/lib/virt-rdma/job-*.xml | wc -l)" = "$jobs_before" ] ||
            fail "g3 opted out of RDMA, but a's helper made a job for its migration"
        say "g3, opted out, migrated b->a over libvirt's TCP: no RDMA job on a"
        virsh -q destroy g3 > /dev/null; virsh -q undefine g3 > /dev/null
        remote "virsh -q undefine g3 > /dev/null" || fail "cannot undefine g3 on b"

        # [migration] rdma = off on a: the helpers still negotiate for the
        # tagged g1 (the hook cannot see the URI), but nothing steers its
        # QEMU, so libvirt's TCP carries it; both jobs end as over-tcp
        # when a's QEMU exits, not failed after the engines' idle timeout
        stop_helper
        sed -i 's/^rdma=all$/rdma=off/' /etc/virt-rdma/virt-rdmad.conf
        run_helper
        wait_locator g1 sandbox-a
        say "virsh migrate --live --p2p --persistent g1 $dest_b ([migration] rdma = off on a)"
        timed virsh migrate --live --p2p --persistent g1 "$dest_b" ||
            fail "plain virsh migrate of g1 under rdma = off failed"
        remote "check_arrived g1" || fail "g1 did not arrive on b intact"
        deadline=$((SECONDS + 60))
        until virt-rdma jobinfo --completed g1 2>/dev/null | grep -q '^RDMA job: .*(over-tcp)'; do
            [ $SECONDS -ge $deadline ] && { virt-rdma jobinfo --completed g1; fail "a's job of g1 did not end as over-tcp"; }
            nap 0.5
        done
        virt-rdma jobinfo --completed g1 | grep -E '^RDMA (job|error)' | sed 's/^/  [a] /'
        remote "deadline=\$((SECONDS + 60)); until virt-rdma jobinfo g1 2>/dev/null | grep -q '^RDMA job: .*(over-tcp)'; do [ \$SECONDS -ge \$deadline ] && { virt-rdma jobinfo g1; exit 1; }; nap 0.5; done; virt-rdma jobinfo g1 | grep -E '^RDMA (job|error)'" ||
            fail "b's job of g1 did not end as over-tcp"
        leftovers_both
        remote "virsh migrate --live --p2p --persistent g1 $dest_a" ||
            fail "plain virsh migrate of g1 b->a failed"
        check_arrived g1
        stop_helper
        sed -i '/^rdma=off$/d' /etc/virt-rdma/virt-rdmad.conf
        run_helper
        wait_locator g1 sandbox-a
        leftovers_both
    fi

    step 9 && storage_steps
    if step 12; then
        # 12. the refusals, in the same boot (CI time): g1 runs on a, and
        #     b keeps no definition of it (the refusals check that none
        #     appears there)
        remote "virsh -q undefine g1 > /dev/null" || fail "cannot undefine g1 on b"
        refusal_steps
    fi
    ;;
storage)
    storage_steps
    ;;
refusals)
    refusal_steps
    ;;
*)
    fail "unknown scenario '$scenario'"
    ;;
esac
remote_stop
say "done"
