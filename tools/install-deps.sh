#!/bin/bash
# install-deps.sh: install, from Debian's archive, everything virt-rdma needs
# to build, to run its sandbox and to pass its tests. Debian 12, as root.
set -euo pipefail

packages=(
    # build
    gcc clang libclang-rt-14-dev meson ninja-build pkg-config gettext
    libibverbs-dev librdmacm-dev libvirt-dev libxml2-dev libxml2-utils
    libglib2.0-dev python3-docutils
    # virt-rdma's JSON output (tools/cli/vrmclijson.c)
    libjson-glib-dev
    # the helpers' TLS channel (virt-rdmad)
    libgnutls28-dev
    # tests: certtool makes the x509 PKI of vrmhelperpeertest
    gnutls-bin
    # tests: the translation check makes a German locale (localedef)
    locales
    # tests: Prometheus' own parser reads the helper's metrics file
    python3-prometheus-client
    # tests: virt-rdma's JSON output is validated against its JSON Schema
    python3-jsonschema
    # sandbox: QEMU (TCG), Debian's kernel (ships rdma_rxe), busybox initramfs
    qemu-system-x86 linux-image-amd64 busybox-static cpio gzip kmod
    # inside the sandbox: RDMA user space and reference tools
    rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2
    # inside the sandbox: the transparent mode steers QEMU's TCP migration
    # with an nftables rule (tests/rdma/engine/engine-pair.sh, virt-rdmad)
    nftables
    # inside the sandbox: `ninja -C build bench` with VRM_BENCH_PROFILE=1
    linux-perf
    # inside the sandbox: libvirt hosts for the end-to-end tests
    libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
    python3 procps
    # e2e: a management application's migration (libvirt-python migrateToURI3)
    python3-libvirt
    # e2e: the TLS migration's plaintext check taps the sandbox's wire
    tcpdump
    # packaging: dpkg-buildpackage with debhelper (compat 13) and lintian
    # (tools/build-debs.sh, tests/run-all.sh); systemd for systemd.pc (the
    # unit directory) and systemd-socket-activate (stock-host e2e test)
    dpkg-dev debhelper lintian systemd adduser
    # AppArmor: apparmor_parser checks the abstractions (unit suite) and
    # loads libvirt's profiles inside the sandbox (stock-host e2e test)
    apparmor
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

# The stock-host e2e test installs Debian's libvirt-daemon-system (default
# qemu.conf, libvirt's AppArmor profiles, the libvirt-qemu user) inside the
# sandbox VMs only: installed here it would start libvirtd on this machine.
# Keep its .deb, of the version of the installed libvirt, for the VMs.
debs=/var/cache/virt-rdma-sandbox
version=$(dpkg-query -W -f='${Version}' libvirt-daemon)
mkdir -p "$debs"
if ! ls "$debs"/libvirt-daemon-system_*.deb 2>/dev/null | grep -qF "_${version#*:}_"; then
    rm -f "$debs"/libvirt-daemon-system_*.deb
    (cd "$debs" && apt-get download -q -o APT::Sandbox::User=root "libvirt-daemon-system=$version")
fi
