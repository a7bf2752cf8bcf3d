#!/bin/bash
# native-rdma.sh: QEMU's own RDMA migration (rdma: URI) of the e2e guest
# through libvirt, as users run it without virt-rdma: the reference that
# virt-rdma is measured against. libvirt 9.0 always turns on return-path,
# which QEMU 7.2's RDMA code serves only with postcopy enabled, so
# --postcopy is given as a capability (the migration never switches to
# postcopy). Exits non-zero, with QEMU's error, when it fails.
set -u
. "$(dirname "$0")/e2e-lib.sh"

start_libvirt
if [ "$VRM_SANDBOX_HOST" = a ]; then
    define_guest g1 128 "dirty_kb=2048" 512
    wait_flag libvirt-b 120
    say "migrating with QEMU's rdma: transport"
    virsh migrate --live --p2p --persistent --rdma-pin-all --postcopy g1 \
        qemu+tcp://$VRM_PEER_ADDR/system \
        --migrateuri rdma://$VRM_PEER_ADDR:49152 --listen-address $VRM_PEER_ADDR ||
        fail "QEMU's own RDMA migration failed"
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
