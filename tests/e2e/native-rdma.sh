#!/bin/bash
# native-rdma.sh: QEMU's own RDMA migration (rdma: URI) of the e2e guest
# through libvirt, as users run it without virt-rdma: the reference that
# virt-rdma is measured against. It needs a memory hard limit (pin-all) and
# a listen address (the default [::] fails on RoCE). Exits non-zero, with
# QEMU's error, when it fails.
#
# VRM_NATIVE_RDMA_POSTCOPY (1, the default; 0): libvirt 9.0 always turns on
# return-path, which QEMU 7.2's RDMA code serves only with postcopy enabled,
# so on Debian 12 --postcopy is given as a capability (the migration never
# switches to postcopy). On Debian 13 (libvirt 11.3, QEMU 10.0) the return
# path works without it, and with it the destination QEMU refuses the rdma:
# URI ("Migration requires multi-channel URIs (e.g. tcp)"): there it is 0.
#
# Two attempts, each bounded: QEMU's RDMA code over Soft-RoCE under TCG
# fails now and then on its own (the recipe's 9 of 10; stop 30's CI saw a
# virsh migrate that hung for more than 400 s on Debian 13). This is the
# reference, not virt-rdma: one such failure is printed with QEMU's words
# and the migration is tried once more; two fail the test.
set -u
. "$(dirname "$0")/e2e-lib.sh"
postcopy=()
[ "${VRM_NATIVE_RDMA_POSTCOPY:-1}" = 1 ] && postcopy=(--postcopy)
what="with QEMU's rdma: transport"
attempt_limit=180   # s; a 128 MiB guest takes well under a minute

# native_attempt N: one bounded virsh migrate; prints what virsh and QEMU
# said when it fails
native_attempt() {
    local rc
    say "migrating $what (attempt $1)"
    migrate_bounded "$attempt_limit" g1 "qemu+tcp://$VRM_PEER_ADDR/system" \
        --live --p2p --persistent --rdma-pin-all "${postcopy[@]}" \
        --migrateuri "rdma://$VRM_PEER_ADDR:49152" --listen-address "$VRM_PEER_ADDR" && return 0
    rc=$?
    say "attempt $1 failed (status $rc); the end of the source QEMU's log:"
    tail -n 8 /var/log/libvirt/qemu/g1.log 2>/dev/null | sed 's/^/    /'
    return 1
}

start_libvirt
if [ "$VRM_SANDBOX_HOST" = a ]; then
    define_guest g1 128 "dirty_kb=2048" 512
    wait_flag libvirt-b 120
    if ! native_attempt 1; then
        [ "$(virsh domstate g1)" = running ] ||
            fail "after the failed attempt g1 is '$(virsh domstate g1)' on a, not running"
        # the destination's libvirt removes its incoming domain when told
        # of the failure
        nap 5
        native_attempt 2 || fail "virsh migrate ($what) failed twice"
    fi
    check_migrated_source g1
    flag migrated
    wait_flag verified-b 240
else
    flag libvirt-b
    # two bounded attempts, each with up to 60 s for its abort
    wait_flag migrated $((2 * (attempt_limit + 60) + 60))
    check_arrived g1
    flag verified-b
fi
say "done"
