#!/bin/bash
# demo.sh: the main job, on a fresh Debian 12 machine, as root. Installs
# what is needed, builds virt-rdma, boots the two-host Soft-RoCE sandbox
# (two QEMU VMs on an emulated wire, each with an rxe device, a libvirtd,
# virt-rdmad and the libvirt hook), starts a guest on host a that fills its
# RAM with a pattern, live-migrates it to host b with
# `virt-rdma migrate --verbose`, prints the progress and the final
# `virt-rdma jobinfo --completed`, and checks the guest's memory on b.
#
#   --no-install   skip apt-get
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[ "${1:-}" = --no-install ] || bash tools/install-deps.sh
build=${VRM_BUILD:-$top/build}
[ -f "$build/build.ninja" ] || meson setup "$build"
ninja -C "$build"

run="VRM_GUEST_ELF=$build/tests/e2e/guest/vrm-guest.elf VRM_BUILD_DIR=$build bash $top/tests/e2e/rdma-migrate.sh demo"
exec "$build/tests/sandbox/vrm-sandbox" --hosts 2 --mem 2048 --timeout 600 --follow \
    --a "$run" --b "$run"
