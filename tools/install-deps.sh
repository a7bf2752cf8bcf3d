#!/bin/bash
# install-deps.sh: install, from Debian's archive, everything virt-rdma needs
# to build, to run its sandbox and to pass its tests. Debian 12, as root.
set -euo pipefail

packages=(
    # build
    gcc clang libclang-rt-14-dev meson ninja-build pkg-config gettext
    libibverbs-dev librdmacm-dev libvirt-dev libxml2-dev libxml2-utils
    libglib2.0-dev python3-docutils
    # the helpers' TLS channel (virt-rdmad)
    libgnutls28-dev
    # tests: certtool makes the x509 PKI of vrmhelperpeertest
    gnutls-bin
    # sandbox: QEMU (TCG), Debian's kernel (ships rdma_rxe), busybox initramfs
    qemu-system-x86 linux-image-amd64 busybox-static cpio gzip kmod
    # inside the sandbox: RDMA user space and reference tools
    rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2
    # inside the sandbox: libvirt hosts for the end-to-end tests
    libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
    python3 procps
    # e2e: a management application's migration (libvirt-python migrateToURI3)
    python3-libvirt
    # compat suite: makes the Debian 13 sandbox root from the archive
    # (tests/compat/mkroot.sh); the archive keyring has Debian 13's keys
    mmdebstrap debian-archive-keyring
)

if [ "$(id -u)" != 0 ]; then
    echo "install-deps.sh: run as root (it uses apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${packages[@]}"
