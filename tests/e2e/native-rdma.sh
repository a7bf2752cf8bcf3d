#!/bin/bash
# native-rdma.sh: QEMU's own RDMA migration (rdma: URI) of the e2e guest
# through libvirt, as users run it without virt-rdma: the reference that
# virt-rdma is measured against. It needs a memory hard limit (pin-all) and
# a listen address (the default [::] fails on RoCE). libvirt 9.0 always
# turns on return-path, which QEMU 7.2's RDMA code serves only with
# postcopy enabled, so --postcopy is given as a capability (the migration
# never switches to postcopy). Exits non-zero, with QEMU's error, when it
# fails.
set -u
. "$(dirname "$0")/e2e-lib.sh"
virsh_scenario "with QEMU's rdma: transport" 512 --live --p2p --persistent \
    --rdma-pin-all --postcopy --migrateuri "rdma://$VRM_PEER_ADDR:49152" \
    --listen-address "$VRM_PEER_ADDR"
