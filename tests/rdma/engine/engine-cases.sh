#!/bin/bash
# engine-cases.sh: several engine scenarios in one sandbox boot (protocol
# version 2: authentication, hostile peers, QEMU's side, lazy channels,
# confinement). Host a is the source side, host b the destination side.
#
#   engine-cases.sh ENGINE STREAMTEST CASE...
#
# Both hosts run the same list in the same order; before each case they
# meet (marks in the shared directory, with a deadline), each case uses its
# own rdma_cm port and files. A case prints PASS or FAIL lines; the script
# exits non-zero if any case failed on this host. VRM_CASE_LOG=--debug makes
# the engines log everything (default --verbose).
#
# VRM_OLD_ENGINE=1: ENGINE is an engine of protocol version 1 (before the
# contract of driver/contract): its options are translated, the options it
# never had are dropped and it gets 120 s at most, to show which cases fail
# on the old code.
set -u
engine=$1 streamtest=$2
shift 2
impostor=$(dirname "$streamtest")/vrm-impostor
old=${VRM_OLD_ENGINE:-0}
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?}
token=00112233445566778899aabbccddeeff
badtoken=ffeeddccbbaa99887766554433221100
uuid=7b9c3f2e-1d2a-4c5b-8e9f-0a1b2c3d4e5f
log=${VRM_CASE_LOG:---verbose}
small="--chunk-size 64K --ring-depth 8"
rc=0

say() { echo "[$host $case] $*"; }
fail() { say "FAIL: $*"; failed=1; }
mark() { touch "$shared/$case-$1-$host"; }
# wait_mark NAME [SECONDS] [HOST]: the other host's (or HOST's) mark
wait_mark() {
    local other=${3:-$([ "$host" = a ] && echo b || echo a)} n=$(( ${2:-120} * 10 ))
    while [ ! -e "$shared/$case-$1-$other" ] && [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
    [ -e "$shared/$case-$1-$other" ] || { fail "host $other never reached '$1'"; return 1; }
}
# json FILE KEY: a value of an engine's stats record (a version 1 engine's
# keys are looked up by their old names)
json() {
    python3 - "$1" "$2" <<'PY' 2>/dev/null
import json, sys
s = json.load(open(sys.argv[1]))
k = sys.argv[2]
if k not in s:
    old = {"control-received": ("total", "control_received"), "control-sent": ("total", "control_sent"),
           "pinned-bytes": ("total", "pinned_bytes"), "registrations": ("total", "registrations"),
           "established": (None, "channels_established"), "pinned-bound": (None, "pinned_bound")}
    top, name = old.get(k, (None, k.replace("-", "_")))
    s = s[top] if top else s
    k = name
v = s[k]
print(str(v).lower() if isinstance(v, bool) else v)
PY
}
# expect_error LOG TEXT: the engine's one error line says TEXT (ERE)
expect_error() {
    grep -Eq "virt-rdma-engine: error: .*$2" "$1" || { fail "the error line does not say: $2"; tail -5 "$1"; return 1; }
    grep "virt-rdma-engine: error:" "$1" | tail -1
}
# old_args ARGS...: the options of a version 1 engine (VRM_OLD_ENGINE=1)
old_args() {
    oargs=()
    while [ $# -gt 0 ]; do
        case $1 in
        --domain-uuid|--qemu-uid|--qemu-pid|--test-fault) shift 2 ;;
        --verbose) oargs+=(-v); shift ;;
        *) oargs+=("$1"); shift ;;
        esac
    done
}
# src NAME OPTIONS...: a source engine in the background (epid)
src() {
    local name=$1; shift
    if [ "$old" = 1 ]; then
        old_args "$@"
        # shellcheck disable=SC2086
        timeout 120 "$engine" --role source --unix "$w/$name.sock" --listen "$VRM_SELF_ADDR:$port" \
            --token $token --stats-file "$w/$name.json" $small -v "${oargs[@]}" 2>"$w/$name.log" &
        epid=$!
        return
    fi
    # shellcheck disable=SC2086
    "$engine" --role source --qemu-path "$w/$name.sock" --listen "$VRM_SELF_ADDR:$port" \
        --token-fd 3 --stats-fd 4 $small $log "$@" 2>"$w/$name.log" \
        3< <(printf %s $token) 4>"$w/$name.json" &
    epid=$!
}
# dst NAME TOKEN OPTIONS...: a destination engine in the foreground (erc)
dst() {
    local name=$1 tok=$2; shift 2
    if [ "$old" = 1 ]; then
        old_args "$@"
        # shellcheck disable=SC2086
        timeout 120 "$engine" --role destination --unix "$w/$name.sock" --connect "$VRM_PEER_ADDR:$port" \
            --token "$tok" --stats-file "$w/$name.json" $small -v "${oargs[@]}" 2>"$w/$name.log"
        erc=$?
        return
    fi
    # shellcheck disable=SC2086
    "$engine" --role destination --qemu-path "$w/$name.sock" --connect "$VRM_PEER_ADDR:$port" \
        --token-fd 3 --stats-fd 4 $small $log "$@" 2>"$w/$name.log" \
        3< <(printf %s "$tok") 4>"$w/$name.json"
    erc=$?
}
# src_tcp NAME QPORT OPTIONS...: a source engine of the transparent mode
# (epid): its TCP listener as a descriptor, and an nftables table of the
# case's own that steers every connection to b's QPORT into it
src_tcp() {
    local name=$1 qport=$2; shift 2
    # shellcheck disable=SC2086
    python3 "$(dirname "$0")/tcp-listen-exec.py" "$w/$name.port" "$engine" --role source --tcp-listen-fd 8 \
        --listen "$VRM_SELF_ADDR:$port" --token-fd 3 --stats-fd 4 $small $log "$@" \
        2>"$w/$name.log" 3< <(printf %s $token) 4>"$w/$name.json" &
    epid=$!
    for _ in $(seq 100); do [ -s "$w/$name.port" ] && break; sleep 0.1; done
    nft -f - <<NFT || fail "cannot add the steering rule"
table inet vrm_case_$name {
    chain out {
        type nat hook output priority -110;
        ip daddr $VRM_PEER_ADDR tcp dport $qport redirect to :$(cat "$w/$name.port")
    }
}
NFT
}
# dst_tcp NAME OPTIONS...: a destination engine of the transparent mode (erc)
dst_tcp() {
    local name=$1; shift
    # shellcheck disable=SC2086
    "$engine" --role destination --tcp-port-min 49152 --tcp-port-max 49215 \
        --connect "$VRM_PEER_ADDR:$port" --token-fd 3 --stats-fd 4 $small $log "$@" \
        2>"$w/$name.log" 3< <(printf %s $token) 4>"$w/$name.json"
    erc=$?
}
stream_src() { "$streamtest" --role source --unix "$w/$1.sock" "${@:2}" >"$w/$1-stream.log" 2>&1; }
stream_dst() { "$streamtest" -uuid $uuid --role destination --unix "$w/$1.sock" "${@:2}" >"$w/$1-stream.log" 2>&1; }
# elapsed since T0 (seconds, float)
since() { echo "$(date +%s.%N) - $1" | bc; }

# ---- the cases: case_NAME_a and case_NAME_b ---------------------------

# An impostor at the source's address (a hostile rdma_cm listener without
# the token, tests/rdma/engine/vrm-impostor.c): the destination must not
# send it the token, and must refuse it before releasing anything (no ring
# description, no memory key).
case_impostor_source_a() {
    "$impostor" --listen "$VRM_SELF_ADDR" --port $port --token $token --seconds 10 >"$w/imp.out" 2>&1
    irc=$?
    cat "$w/imp.out"
    [ $irc = 0 ] || fail "the impostor got something from the destination (exit $irc)"
}
case_impostor_source_b() {
    local t0=$(date +%s.%N)
    dst imp $token --deadline-connect 30 --domain-uuid $uuid --pin-all
    [ $erc != 0 ] || fail "the destination accepted an impostor"
    expect_error "$w/imp.log" "the peer at $VRM_PEER_ADDR:$port could not prove it holds this job's token"
    [ "$(json "$w/imp.json" control-sent)" = 0 ] || fail "the destination sent something (a key?) to the impostor"
    [ "$(echo "$(since $t0) < 15" | bc)" = 1 ] || fail "it took $(since $t0) s to refuse"
}

# The same with the engine's own test hook: an impostor source engine
case_impostor_engine_a() {
    src imp --deadline-connect 8 --test-fault impostor
    wait $epid
    [ "$(json "$w/imp.json" control-received)" = 0 ] || fail "the destination sent something to the impostor"
}
case_impostor_engine_b() {
    dst imp $token --deadline-connect 30 --pin-all
    [ $erc != 0 ] || fail "the destination accepted an impostor"
    expect_error "$w/imp.log" "the peer at $VRM_PEER_ADDR:$port could not prove it holds this job's token"
    [ "$(json "$w/imp.json" control-sent)" = 0 ] || fail "the destination sent something (a key?) to the impostor"
}

# A destination without the token: the source sends it nothing, logs the
# peer and listens again; the real destination then completes the job.
case_bad_auth_a() {
    src job --deadline-connect 60 --domain-uuid $uuid
    stream_src job --bytes 1M+3 --reverse-bytes 64K+1 || fail "the stream failed"
    wait $epid || fail "the source engine failed: $(grep error: "$w/job.log" | tail -1)"
    grep -Eq "channel 0: the peer could not prove it holds this job's token \(peer [0-9.]+:[0-9]+\); listening again" "$w/job.log" ||
        fail "no warning about the unauthenticated peer"
    grep -E "listening again" "$w/job.log" | head -2
}
case_bad_auth_b() {
    dst bad $token --deadline-connect 30 --test-fault bad-auth
    [ $erc != 0 ] || fail "a destination with a wrong AUTH completed"
    [ "$(json "$w/bad.json" control-received)" = 0 ] || fail "the source sent something before a valid AUTH"
    stream_dst job --bytes 1M+3 --reverse-bytes 64K+1 &
    spid=$!
    dst job $token --deadline-connect 60 --domain-uuid $uuid
    [ $erc = 0 ] || fail "the real destination failed: $(grep error: "$w/job.log" | tail -1)"
    wait $spid || fail "the stream failed"
}

# The destination holds another token: it refuses the source's proof and
# goes; the source takes it for a peer that did not authenticate, logs it
# and listens again until its deadline, having sent nothing
case_wrong_token_a() {
    src wt --deadline-connect 15
    wait $epid
    expect_error "$w/wt.log" "channel 0 was not connected by an authenticated peer within 15 seconds; [0-9]+ connection attempts were refused \\(last: the peer could not prove it holds the job's token\\)"
    grep -Eq "channel 0: the peer could not prove it holds this job's token \\(peer [0-9.]+:[0-9]+\\); listening again" "$w/wt.log" ||
        fail "no log line about the unauthenticated peer"
    [ "$(json "$w/wt.json" bytes-sent)" = 0 ] || fail "bytes moved"
    [ "$(json "$w/wt.json" established)" = 0 ] || fail "a channel was established"
}
case_wrong_token_b() {
    dst wt $badtoken --deadline-connect 30
    expect_error "$w/wt.log" "the peer at $VRM_PEER_ADDR:$port could not prove it holds this job's token"
    [ "$(json "$w/wt.json" control-sent)" = 0 ] || fail "the destination sent something to an unproven peer"
}

# A malformed control message from the peer ends the job on both sides
case_malformed_a() {
    src mf --deadline-connect 60 --test-fault malformed:64K
    stream_src mf --bytes 4M --reverse-bytes 0
    wait $epid
    expect_error "$w/mf.log" "the peer engine reported an error: channel 0: malformed message from the peer: a control message announces 100 data bytes but 8 arrived"
}
case_malformed_b() {
    stream_dst mf --bytes 4M --reverse-bytes 0 &
    spid=$!
    dst mf $token --deadline-connect 60
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    expect_error "$w/mf.log" "channel 0: malformed message from the peer: a control message announces 100 data bytes but 8 arrived"
}

# The failure-injection point of the provider: the 6th completion fails
case_cq_a() {
    VRM_TEST_FAULT_CQ=6 src cq --deadline-connect 60
    stream_src cq --bytes 4M --reverse-bytes 0
    wait $epid
    expect_error "$w/cq.log" "channel 0: a work request failed: general error"
}
case_cq_b() {
    stream_dst cq --bytes 4M --reverse-bytes 0 &
    spid=$!
    dst cq $token --deadline-connect 60
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    expect_error "$w/cq.log" "(the peer engine reported an error: channel 0: a work request failed: general error|the peer closed channel 0 before the end of the stream)"
}

# Version 1 peers are refused, both ways, at once, with the version named
case_v1_peer_a() {
    src v1a --deadline-connect 10
    wait $epid
    grep -q "a peer speaking protocol version 1 was refused" "$w/v1a.log" || fail "no log line about version 1"
    mark first-done
    port=$((port + 1))
    src v1b --deadline-connect 10 --test-fault version
    wait $epid
}
case_v1_peer_b() {
    local t0=$(date +%s.%N)
    dst v1a $token --deadline-connect 30 --test-fault version
    expect_error "$w/v1a.log" "refused the protocol version of this engine \(it speaks version 2"
    [ "$(echo "$(since $t0) < 15" | bc)" = 1 ] || fail "it took $(since $t0) s"
    wait_mark first-done 60
    port=$((port + 1))
    t0=$(date +%s.%N)
    dst v1b $token --deadline-connect 30
    expect_error "$w/v1b.log" "refused the protocol version of this engine \(it speaks version 1"
    [ "$(echo "$(since $t0) < 15" | bc)" = 1 ] || fail "it took $(since $t0) s"
}

# Issue 13 item 12: a REGISTER_REQUEST before the ring description
case_early_register_a() {
    src er --deadline-connect 30
    stream_src er --bytes 256K &
    wait $epid
    expect_error "$w/er.log" "unexpected REGISTER_REQUEST message: the peer's direction is in state 'describe'"
    [ "$(json "$w/er.json" registrations)" = 0 ] || fail "the source registered memory on request"
}
case_early_register_b() {
    stream_dst er --bytes 256K &
    dst er $token --deadline-connect 30 --test-fault early-register
    expect_error "$w/er.log" "the peer engine reported an error: .*unexpected REGISTER_REQUEST"
    kill %1 2>/dev/null
}

# Issue 13 item 12: a SEND longer than a receive buffer, named as such
case_oversize_a() {
    src ov --deadline-connect 30
    stream_src ov --bytes 256K &
    wait $epid
    expect_error "$w/ov.log" "the peer sent a control message larger than 4096 bytes"
}
case_oversize_b() {
    stream_dst ov --bytes 256K &
    dst ov $token --deadline-connect 30 --test-fault oversize
    [ $erc != 0 ] || fail "the destination completed"
    kill %1 2>/dev/null
}

# Issue 13 item 12: a failed source answers "job ended"; the destination
# stops at once instead of retrying for its deadline
case_job_ended_a() {
    wait_mark dst-started 60
    src je --deadline-connect 30 --test-fault fail
    wait $epid
}
case_job_ended_b() {
    local t0=$(date +%s.%N)
    ( sleep 1; mark dst-started ) &
    dst je $token --deadline-connect 40
    expect_error "$w/je.log" "refused channel 0: its job has ended"
    [ "$(echo "$(since $t0) < 20" | bc)" = 1 ] || fail "the destination needed $(since $t0) s (deadline 40)"
    echo "the destination stopped after $(since $t0) s"
}

# Issue 13 item 12: a connect request whose sender has gone costs the
# source nothing; the real destination then completes. The source's hook
# makes its first request fail as when the sender went away before the
# queue pair was made (rdma_cm's EINVAL): a race this case hit only under
# load before the engine dropped such a request instead of failing.
case_vanish_a() {
    src va --deadline-connect 60 --test-fault stale-request
    stream_src va --bytes 512K --reverse-bytes 1K || fail "the stream failed"
    wait $epid || fail "the source failed: $(grep error: "$w/va.log" | tail -1)"
    grep -E "channel 0: test hook: no queue pair for a connect request whose sender has gone: .*; listening again" "$w/va.log" ||
        fail "no log line about the dropped request"
}
case_vanish_b() {
    dst gone $token --deadline-connect 30 --test-fault vanish
    sleep 2
    stream_dst va --bytes 512K --reverse-bytes 1K &
    spid=$!
    dst va $token --deadline-connect 60
    [ $erc = 0 ] || fail "the real destination failed: $(grep error: "$w/va.log" | tail -1)"
    wait $spid || fail "the stream failed"
}

# QEMU's side, source: only root or QEMU's user may connect
case_qemu_creds_a() {
    src qc --deadline-connect 60 --qemu-uid 0
    for _ in $(seq 100); do [ -S "$w/qc.sock" ] && break; sleep 0.1; done
    # the permissions let it connect (as a group member would): the
    # engine's own check must refuse it
    chmod 0777 "$w"; chmod 0666 "$w/qc.sock"
    setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
sys.exit(0 if s.recv(1) == b"" else 1)' "$w/qc.sock" || fail "the impostor's connection was not closed"
    stream_src qc --bytes 256K --reverse-bytes 1K || fail "QEMU's own stream failed"
    wait $epid || fail "the source failed: $(grep error: "$w/qc.log" | tail -1)"
    grep -q "refused a connection to QEMU's socket from pid [0-9]* (uid 65534)" "$w/qc.log" || fail "no log line about the impostor"
}
case_qemu_creds_b() {
    stream_dst qc --bytes 256K --reverse-bytes 1K &
    spid=$!
    dst qc $token --deadline-connect 60 --domain-uuid $uuid
    [ $erc = 0 ] || fail "the destination failed: $(grep error: "$w/qc.log" | tail -1)"
    wait $spid || fail "the stream failed"
}

# QEMU's side, destination: a listener of another user, or of root but not
# QEMU of this domain, gets nothing
case_qemu_impostor_a() {
    src qi1 --deadline-connect 30
    stream_src qi1 --bytes 64K --deadline 30 &
    wait $epid
    mark first-done
    port=$((port + 1))
    src qi2 --deadline-connect 30
    stream_src qi2 --bytes 64K --deadline 30 &
    wait $epid
}
case_qemu_impostor_b() {
    chmod 0777 "$w"
    local listener='
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
time.sleep(40)'
    ( umask 0; setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c "$listener" "$w/qi1.sock" ) &
    lpid=$!
    dst qi1 $token --deadline-connect 30
    expect_error "$w/qi1.log" "QEMU's socket .* is served by pid [0-9]+ of uid 65534, not by QEMU's user \(uid 0\) or root"
    kill $lpid 2>/dev/null
    wait_mark first-done 60
    port=$((port + 1))
    python3 -c "$listener" "$w/qi2.sock" &
    lpid=$!
    dst qi2 $token --deadline-connect 30 --domain-uuid $uuid
    expect_error "$w/qi2.log" "whose command line does not carry -uuid $uuid: not QEMU of this domain"
    kill $lpid 2>/dev/null
}

# The transparent mode's refusals. 1: the destination connects only to
# QEMU's migration ports (a steered connection to port 40000 is refused
# there). 2: the source takes only QEMU's user's connections (one of
# uid 65534, steered like QEMU's, is refused and the job goes on), and the
# destination sends nothing to a listener of another user in the range.
case_tcp_refusals_a() {
    src_tcp tr1 40000 --deadline-connect 30
    "$streamtest" --role source --unix "tcp:$VRM_PEER_ADDR:40000" --bytes 64K \
        --deadline 30 >"$w/tr1-stream.log" 2>&1 &
    stpid=$!
    wait $epid && fail "the source engine went on with a refused channel"
    kill $stpid 2>/dev/null
    nft delete table inet vrm_case_tr1
    mark first-done
    port=$((port + 1))
    src_tcp tr2 49200 --deadline-connect 30
    setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], 49200), timeout=10)
s.settimeout(10)
sys.exit(0 if s.recv(1) == b"" else 1)' "$VRM_PEER_ADDR" || fail "uid 65534's connection was not closed"
    grep -q "refused a TCP connection from .* to $VRM_PEER_ADDR:49200: its socket belongs to uid 65534, not to QEMU's user (uid 0) or root" "$w/tr2.log" ||
        fail "no log line about uid 65534's connection"
    "$streamtest" --role source --unix "tcp:$VRM_PEER_ADDR:49200" --bytes 64K \
        --deadline 30 >"$w/tr2-stream.log" 2>&1 &
    stpid=$!
    wait $epid && fail "the source engine went on with a refused channel"
    kill $stpid 2>/dev/null
    nft delete table inet vrm_case_tr2
}
case_tcp_refusals_b() {
    dst_tcp tr1 --deadline-connect 30
    expect_error "$w/tr1.log" "to be opened to $VRM_SELF_ADDR:40000, outside QEMU's migration ports 49152-49215; refused"
    wait_mark first-done 60
    port=$((port + 1))
    setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c '
import socket, sys, time
s = socket.socket()
s.bind((sys.argv[1], 49200)); s.listen(8)
time.sleep(40)' "$VRM_SELF_ADDR" &
    lpid=$!
    dst_tcp tr2 --deadline-connect 30
    expect_error "$w/tr2.log" "QEMU's port $VRM_SELF_ADDR:49200 is served by uid 65534, not by QEMU's user \(uid 0\) or root"
    kill $lpid 2>/dev/null
}

# The transparent mode's silent port: QEMU's port drops the destination
# engine's SYN (an nftables rule on b); the connect, in progress, gives
# up at its deadline with the reason instead of waiting for ever
case_tcp_silent_a() {
    src_tcp ts 49201 --deadline-connect 30
    "$streamtest" --role source --unix "tcp:$VRM_PEER_ADDR:49201" --bytes 64K \
        --deadline 30 >"$w/ts-stream.log" 2>&1 &
    stpid=$!
    wait $epid && fail "the source engine went on without its destination"
    kill $stpid 2>/dev/null
    nft delete table inet vrm_case_ts
}
case_tcp_silent_b() {
    nft -f - <<NFT || fail "cannot add the dropping rule"
table inet vrm_case_ts_drop {
    chain in {
        type filter hook input priority 0;
        tcp dport 49201 drop
    }
}
NFT
    local t0=$(date +%s)
    dst_tcp ts --deadline-connect 5
    expect_error "$w/ts.log" "could not connect channel 0 to QEMU at $VRM_SELF_ADDR:49201 within 5 seconds"
    [ $(( $(date +%s) - t0 )) -lt 30 ] || fail "the destination waited past its deadline"
    nft delete table inet vrm_case_ts_drop
}

# A QEMU listener that takes no connection (its backlog full): the
# destination's connect never blocks, it gives up at its deadline
case_stalled_listener_a() {
    src sl --deadline-connect 40 --idle-timeout 40
    stream_src sl --bytes 64K --deadline 40 &
    wait $epid
}
case_stalled_listener_b() {
    local t0
    python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(0)
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])   # fills the backlog
time.sleep(60)' "$w/sl.sock" &
    lpid=$!
    sleep 1
    t0=$(date +%s.%N)
    dst sl $token --deadline-connect 5
    kill $lpid 2>/dev/null
    expect_error "$w/sl.log" "could not connect channel 0 to QEMU at .* within 5 seconds"
    [ "$(echo "$(since $t0) < 20" | bc)" = 1 ] || fail "the destination needed $(since $t0) s with a deadline of 5 s"
    echo "gave up after $(since $t0) s"
}

# wait_sent SOCKET BYTES SECONDS: the engine's live stats socket shows a
# QEMU connection and more than BYTES sent, within SECONDS (the engine's
# interface, not its log's wording)
wait_sent() {
    python3 - "$@" <<'PY'
import json, socket, sys, time
path, want, limit = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
j = {}
while time.monotonic() < limit:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(path)
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        j = json.loads(data)
        if j.get("qemu-connections", 0) >= 1 and j.get("bytes-sent", 0) > want:
            print("stats socket: %d QEMU connection(s), %d bytes sent" % (j["qemu-connections"], j["bytes-sent"]))
            sys.exit(0)
    except (OSError, ValueError):
        pass
    time.sleep(0.2)
print("stats socket %s: no QEMU connection with more than %d bytes sent in time (last: %s)" % (path, want, j))
sys.exit(1)
PY
}

# Issue 13 item 11: QEMU crashes mid-stream; the job fails, named so
case_qemu_gone_a() {
    # the stand-in itself in the background ($! its pid, not a subshell's)
    ( exec "$streamtest" --role source --unix "$w/qg.sock" --bytes 512M --deadline 60 \
        >"$w/qg-stream.log" 2>&1 ) &
    spid=$!
    src qg --deadline-connect 60 --qemu-pid $spid --domain-uuid $uuid --stats-socket "$w/qg-stats.sock"
    wait_sent "$w/qg-stats.sock" $((1 << 20)) 30 || fail "no bytes of QEMU's stream moved within 30 s"
    kill -9 $spid
    wait $epid
    expect_error "$w/qg.log" "QEMU \(pid $spid\) of domain $uuid exited mid-stream"
    [ "$(json "$w/qg.json" qemu-gone)" = true ] || fail "qemu-gone is not true in the stats record"
}
case_qemu_gone_b() {
    ( exec "$streamtest" -uuid $uuid --role destination --unix "$w/qg.sock" --bytes 512M \
        --deadline 60 >"$w/qg-stream.log" 2>&1 ) &
    spid=$!
    dst qg $token --deadline-connect 60
    [ $erc != 0 ] || fail "the destination completed a stream whose QEMU died"
    grep "virt-rdma-engine: error:" "$w/qg.log" | tail -1
    kill $spid 2>/dev/null
}

# Lazy channels: a maximum of 8, QEMU uses 2; only 2 are connected and
# pinned
case_lazy_channels_a() {
    src lz --deadline-connect 60 --channels 8
    stream_src lz --channels 2 --bytes 300K+1 --reverse-bytes 5 || fail "the stream failed"
    wait $epid || fail "the source failed: $(grep error: "$w/lz.log" | tail -1)"
    lazy_check lz
}
case_lazy_channels_b() {
    stream_dst lz --channels 2 --bytes 300K+1 --reverse-bytes 5 &
    spid=$!
    dst lz $token --deadline-connect 60 --channels 8
    [ $erc = 0 ] || fail "the destination failed: $(grep error: "$w/lz.log" | tail -1)"
    wait $spid || fail "the stream failed"
    lazy_check lz
}
lazy_check() {
    local ch est pinned bound
    ch=$(json "$w/$1.json" channels); est=$(json "$w/$1.json" established)
    pinned=$(json "$w/$1.json" pinned-bytes); bound=$(json "$w/$1.json" pinned-bound)
    echo "channels offered $ch, connected $est; pinned $pinned bytes of a bound of $bound"
    [ "$ch" = 8 ] || fail "the agreed maximum is $ch, not 8"
    [ "$est" = 2 ] || fail "$est channels were connected, QEMU opened 2"
    [ "$pinned" -le $((bound / 4)) ] || fail "pinned $pinned bytes: more than 2 of 8 channels"
}

# Least privilege: engines as an unprivileged user, no capabilities, no new
# privileges, not dumpable, the seccomp filter in force, memlock limited to
# one channel's need (which they check themselves: a smaller limit refuses)
# (it execs: run it in a subshell, so that $! of "unpriv ... &" is the
# engine's own pid, prlimit and setpriv exec'ing in turn)
unpriv() {   # MEMLOCK ENGINE ARGS...
    local lim=$1; shift
    exec prlimit --memlock="$lim:$lim" setpriv --reuid=65534 --regid=65534 --clear-groups \
        --inh-caps=-all --bounding-set=-all --no-new-privs "$@"
}
confinement_check() {   # PID LIMIT
    local st=/proc/$1/status
    grep -q "^Uid:[[:space:]]*65534[[:space:]]65534" $st || fail "uid: $(grep ^Uid $st)"
    grep -q "^CapEff:[[:space:]]*0000000000000000" $st || fail "$(grep ^CapEff $st)"
    grep -q "^CapBnd:[[:space:]]*0000000000000000" $st || fail "$(grep ^CapBnd $st)"
    grep -q "^NoNewPrivs:[[:space:]]*1" $st || fail "$(grep ^NoNewPrivs $st)"
    grep -q "^Seccomp:[[:space:]]*2" $st || fail "$(grep ^Seccomp $st)"
    grep -q "^Max locked memory *$2 *$2 *bytes" /proc/$1/limits || fail "$(grep 'locked memory' /proc/$1/limits)"
    # not dumpable: its /proc files are root's, not its user's
    [ "$(stat -c %u /proc/$1/environ)" = 0 ] || fail "/proc/$1/environ belongs to uid $(stat -c %u /proc/$1/environ)"
    grep -E "^(Uid|CapEff|CapBnd|NoNewPrivs|Seccomp)" $st | tr '\n' ' '; echo
}
# the need of one channel of depth 8 and 64K chunks (util/vrmlimits.c)
one_channel=$(( 2 * 8 * 65536 + (2 * 8 + 32 + 4 * 8 + 32) * 4096 ))
case_unprivileged_a() {
    chmod 0666 /dev/infiniband/* 2>/dev/null
    chmod 0777 "$w"
    ( unpriv $((one_channel - 4096)) "$engine" --role source --qemu-path "$w/up0.sock" \
        --listen "$VRM_SELF_ADDR:$port" --token-fd 3 $small 2>"$w/up0.log" 3< <(printf %s $token) )
    expect_error "$w/up0.log" "1 channel needs $one_channel bytes of locked memory but RLIMIT_MEMLOCK allows $((one_channel - 4096))"
    port=$((port + 1))
    unpriv $((one_channel + 262144)) "$engine" --role source --qemu-path "$w/up.sock" \
        --listen "$VRM_SELF_ADDR:$port" --token-fd 3 --stats-fd 4 $small $log 2>"$w/up.log" \
        3< <(printf %s $token) 4>"$w/up.json" &
    epid=$!
    # looked at while it waits for its QEMU, which only comes once the
    # destination's side has looked at its engine too (in a busy one-CPU
    # guest the shell may not get to look before a stream ends)
    for _ in $(seq 100); do grep -q "listening on" "$w/up.log" && break; sleep 0.1; done
    confinement_check $epid $((one_channel + 262144))
    wait_mark checked 60
    stream_src up --bytes 4M --reverse-bytes 64K || fail "the stream failed"
    wait $epid || fail "the unprivileged source failed: $(grep error: "$w/up.log" | tail -1)"
}
case_unprivileged_b() {
    chmod 0666 /dev/infiniband/* 2>/dev/null
    chmod 0777 "$w"
    port=$((port + 1))
    ( umask 0; stream_dst up --bytes 4M --reverse-bytes 64K ) &
    spid=$!
    unpriv $((one_channel + 262144)) "$engine" --role destination --qemu-path "$w/up.sock" \
        --connect "$VRM_PEER_ADDR:$port" --token-fd 3 --stats-fd 4 $small $log 2>"$w/up.log" \
        3< <(printf %s $token) 4>"$w/up.json" &
    epid=$!
    # looked at before the source's QEMU starts its stream
    for _ in $(seq 100); do grep -q "pinned memory" "$w/up.log" && break; sleep 0.1; done
    confinement_check $epid $((one_channel + 262144))
    mark checked
    wait $epid || fail "the unprivileged destination failed: $(grep error: "$w/up.log" | tail -1)"
    wait $spid || fail "the stream failed"
}

# ---- run them -----------------------------------------------------------
k=0
for case in "$@"; do
    failed=0
    port=$((19000 + 10 * k))
    k=$((k + 1))
    w=$(mktemp -d "/tmp/vrm-case-$case.XXXXXX")
    fn=case_${case//-/_}_$host
    if ! declare -F "$fn" >/dev/null; then
        echo "unknown case $case"; rc=1; continue
    fi
    mark ready
    wait_mark ready 180 || { rc=1; continue; }
    say "start (port $port)"
    t0=$(date +%s)
    "$fn"
    mark done
    wait_mark done 300
    if [ $failed = 0 ]; then
        say "PASS ($(( $(date +%s) - t0 )) s)"
    else
        say "FAIL; engine logs:"
        for f in "$w"/*.log; do echo "--- $f"; tail -15 "$f"; done
        rc=1
    fi
done
exit $rc
