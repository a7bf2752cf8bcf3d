#!/bin/bash
# tcp-baseline.sh: plain libvirt TCP live migration of the e2e guest between
# the two sandbox hosts: what users do without RDMA, and the proof that the
# e2e harness (two libvirt hosts, the guest and its memory check) works.
set -u
. "$(dirname "$0")/e2e-lib.sh"
virsh_scenario "over TCP" "" --live --p2p --persistent \
    --migrateuri "tcp://$VRM_PEER_ADDR:49152"
