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
set -u
. "$(dirname "$0")/e2e-lib.sh"
postcopy=()
[ "${VRM_NATIVE_RDMA_POSTCOPY:-1}" = 1 ] && postcopy=(--postcopy)
virsh_scenario "with QEMU's rdma: transport" 512 --live --p2p --persistent \
    --rdma-pin-all "${postcopy[@]}" --migrateuri "rdma://$VRM_PEER_ADDR:49152" \
    --listen-address "$VRM_PEER_ADDR"
