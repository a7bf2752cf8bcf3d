#!/bin/bash
# tcp-baseline.sh: plain libvirt TCP live migration of the e2e guest between
# the two sandbox hosts: what users do without RDMA, and the proof that the
# e2e harness (two libvirt hosts, the guest and its memory check) works.
set -u
. "$(dirname "$0")/e2e-lib.sh"

start_libvirt
if [ "$VRM_SANDBOX_HOST" = a ]; then
    define_guest g1 128 "dirty_kb=2048"
    wait_flag libvirt-b 120
    say "migrating over TCP"
    virsh migrate --live --p2p --persistent g1 qemu+tcp://$VRM_PEER_ADDR/system \
        --migrateuri tcp://$VRM_PEER_ADDR:49152 || fail "virsh migrate failed"
    check_migrated_source g1
    flag migrated
    wait_flag verified-b 240
else
    flag libvirt-b
    wait_flag migrated 400
    check_migrated_destination g1
    flag verified-b
fi
say "done"
