#!/bin/bash
# engine-fault.sh: failure cases between sandbox hosts a (source) and b.
#
#   engine-fault.sh ENGINE STREAMTEST CASE
#
# CASE: kill | link-down (the other failure cases are in engine-cases.sh,
# several per boot)
# Each side asserts its engine's exit status and the specific error text,
# and that the failing job ended within the deadline. VRM_FAULT_LOG=--debug
# makes the engines log everything (default --verbose).
set -u
engine=$1 streamtest=$2 case=$3
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
shared=${VRM_SANDBOX_SHARED:?}
token=00112233445566778899aabbccddeeff
badtoken=00112233445566778899aabbccddeefe
port=18600
sock=/tmp/vrm-fault.sock
work=$(mktemp -d /tmp/vrm-fault.XXXXXX)
common="--chunk-size 64K --ring-depth 8 --idle-timeout 30 ${VRM_FAULT_LOG:---verbose}"
mark="$shared/fault-$case"

fail() { echo "FAIL ($host, $case): $*"; echo "--- engine log"; cat "$work/engine.log"; exit 1; }

# expect_exit RC TEXT: the engine failed and said TEXT on its error line
expect_error() {
    local rc=$1 text=$2
    [ "$rc" != 0 ] || fail "the engine exited 0"
    grep -Eq "virt-rdma-engine: error: .*$text" "$work/engine.log" ||
        fail "the error line does not say: $text"
    grep "virt-rdma-engine: error:" "$work/engine.log"
}

run_source() {   # extra engine options; sets epid
    # shellcheck disable=SC2086
    "$engine" --role source --qemu-path "$sock" --listen "$VRM_SELF_ADDR:$port" \
        --token-fd 3 $common --stats-fd 4 "$@" 2>"$work/engine.log" \
        3< <(printf %s $token) 4>"$work/stats.json" &
    epid=$!
}

run_dest() {     # TOKEN, then extra engine options
    local tok=$1
    shift
    # shellcheck disable=SC2086
    "$engine" --role destination --qemu-path "$sock" --connect "$VRM_PEER_ADDR:$port" \
        --token-fd 3 $common --stats-fd 4 "$@" 2>"$work/engine.log" \
        3< <(printf %s "$tok") 4>"$work/stats.json"
}

case "$case:$host" in
link-down:a)
    rm -f "$mark"
    run_source --deadline-connect 60
    "$streamtest" --role source --unix "$sock" --bytes 256M --reverse-bytes 0 >/dev/null 2>&1 &
    spid=$!
    seen=
    while kill -0 $epid 2>/dev/null; do
        [ -z "$seen" ] && [ -e "$mark" ] && seen=$(date +%s.%N)
        sleep 0.1
    done
    ended=$(date +%s.%N)
    wait $epid; erc=$?
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    [ -n "$seen" ] || [ -e "$mark" ] || fail "the link never went down"
    [ -n "$seen" ] || seen=$ended
    took=$(echo "$ended - $seen" | bc)
    echo "source engine exited $took s after the link went down"
    grep -E "KEEPALIVE|failing|established" "$work/engine.log" | tail -4
    [ "$erc" != 0 ] || fail "the engine exited 0"
    grep -E "virt-rdma-engine: error: .*(the peer stopped answering|the peer closed channel 0)" "$work/engine.log" ||
        fail "the error line does not say that the peer went away: $(grep -m1 'virt-rdma-engine: error:' "$work/engine.log")"
    [ "$(echo "$took <= 10" | bc)" = 1 ] || fail "the survivor needed $took s (limit 10 s)"
    ;;
link-down:b)
    nic=$(cat /sys/class/infiniband/"${VRM_RDMA_DEVICE:-rxe0}"/ports/1/gid_attrs/ndevs/0 2>/dev/null)
    [ -n "$nic" ] || fail "cannot find the network interface of the RDMA device"
    "$streamtest" --role destination --unix "$sock" --bytes 256M --reverse-bytes 0 >/dev/null 2>&1 &
    spid=$!
    run_dest $token --deadline-connect 60 &
    epid=$!
    # cut the wire once bytes flow
    for _ in $(seq 300); do
        grep -q "channel 0 connected to QEMU" "$work/engine.log" 2>/dev/null && break
        sleep 0.1
    done
    sleep 2
    ip link set "$nic" down
    touch "$mark"
    t0=$(date +%s.%N)
    wait $epid; erc=$?
    took=$(echo "$(date +%s.%N) - $t0" | bc)
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    # The link stays down: this case ends the boot. Bringing it up here
    # once panicked b's kernel (a fresh-clone run of .ci/run, 2026-12-04:
    # "RIP: rxe_skb_tx_dtor", "Kernel panic - not syncing: Fatal
    # exception in interrupt" under `ip link set up`): the engine's
    # packets still in virtio-net's send ring when the link went down are
    # freed on the way up, after the engine's QP is gone, and rdma_rxe's
    # destructor follows the freed QP. Host a's engine then needed 54 s,
    # its wire stalled by the dead host. A Soft-RoCE bug of that kernel.
    echo "destination engine exited $took s after its link went down"
    expect_error $erc "(RDMA device .* failed: port error|the peer stopped answering)"
    [ "$(echo "$took <= 10" | bc)" = 1 ] || fail "the engine needed $took s (limit 10 s)"
    ;;
kill:a)
    rm -f "$mark"
    run_source --deadline-connect 60
    "$streamtest" --role source --unix "$sock" --bytes 64M --reverse-bytes 0 >/dev/null 2>&1 &
    spid=$!
    # the peer writes $mark right after its engine died
    for _ in $(seq 600); do [ -e "$mark" ] && break; sleep 0.1; done
    [ -e "$mark" ] || fail "the peer engine was never killed"
    seen=$(date +%s.%N)
    wait $epid; erc=$?
    ended=$(date +%s.%N)
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    took=$(echo "$ended - $seen" | bc)
    echo "source engine exited $took s after the peer died"
    [ "$erc" != 0 ] || fail "the engine exited 0"
    grep -E "virt-rdma-engine: error: .*(the peer closed channel 0 before the end of the stream|the peer stopped answering)" "$work/engine.log" ||
        fail "the error line does not say that the peer went away: $(grep -m1 'virt-rdma-engine: error:' "$work/engine.log")"
    [ "$(echo "$took <= 10" | bc)" = 1 ] || fail "the survivor needed $took s (limit 10 s)"
    ;;
kill:b)
    "$streamtest" --role destination --unix "$sock" --bytes 64M --reverse-bytes 0 >/dev/null 2>&1 &
    spid=$!
    run_dest $token --deadline-connect 60 --test-fault kill:1M; erc=$?
    touch "$mark"
    kill $spid 2>/dev/null; wait $spid 2>/dev/null
    [ $erc = 137 ] || fail "the engine was not killed by the test hook (exit $erc)"
    echo "destination engine killed after 1 MiB as planned"
    ;;
*)
    echo "unknown case $case"; exit 2 ;;
esac
echo "PASS ($host, $case)"
