#!/bin/bash
# demo.sh: the main job on a fresh Debian 12 machine, as root. Installs what
# is needed, builds virt-rdma, boots the two-host Soft-RoCE sandbox and shows
# each host's RDMA device and an RDMA WRITE crossing the wire between them.
# (Once the virt-rdma CLI lands, this runs a live migration instead.)
#
#   --no-install   skip apt-get
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ "${1:-}" = --no-install ] || bash tools/install-deps.sh
build=${VRM_BUILD:-$top/build}
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build"

pp=$build/tests/rdma/vrmpingpong
show='echo "== host $VRM_SANDBOX_HOST ($VRM_SELF_ADDR) =="; ibv_devinfo -d rxe0 | grep -E "hca_id|transport|state|active_mtu|link_layer"; rdma link show'
exec "$build/tests/sandbox/vrm-sandbox" --hosts 2 --timeout 300 \
    --a "$show; cd /tmp; $pp --server \$VRM_SELF_ADDR --size 16777216" \
    --b "$show; cd /tmp; $pp --connect \$VRM_PEER_ADDR --size 16777216"
