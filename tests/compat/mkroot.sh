#!/bin/bash
# mkroot.sh SUITE ROOT [APT_CACHE]: make (or keep) a Debian root for the
# sandbox's second generation in the directory ROOT, with mmdebstrap from
# the Debian archive that apt on this machine uses. The machine's own root
# is never touched: everything happens below ROOT, as root (mode root:
# files keep their real owners, which the sandbox's 9p export shows).
#
# The root carries what a sandbox host needs (the distribution's kernel
# with rdma_rxe, a static busybox for the initramfs, RDMA user space,
# libvirt and QEMU, iproute2, python3, procps) and what building virt-rdma
# inside it needs (build-root.sh). It is kept while ROOT.stamp names the
# same suite, package list and this script; otherwise it is made anew.
# APT_CACHE, if given, keeps the downloaded .deb files between runs.
#
# Environment: VRM_COMPAT_MIRROR overrides the archive's URL.
set -euo pipefail

suite=${1:?usage: mkroot.sh SUITE ROOT [APT_CACHE]}
root=${2:?usage: mkroot.sh SUITE ROOT [APT_CACHE]}
cache=${3:-}

packages=(
    # boot: the kernel (rdma_rxe, 9p, overlay), busybox for the initramfs
    linux-image-amd64 busybox-static kmod
    # the sandbox host's network and RDMA devices, the reference tools
    iproute2 rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
    # libvirt and QEMU as the distribution ships them (no -system package:
    # nothing starts in the root; the tests start the daemons themselves)
    libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86
    # what the e2e scenarios and the benchmark run
    python3 procps bc
    # a management application's migration (negotiation.sh: libvirt-python)
    python3-libvirt
    # negotiation.sh's TLS migration: a tap on the wire for the plaintext
    # check (certtool, for the test CA, is gnutls-bin below)
    tcpdump
    # the transparent mode's steering rules (negotiation.sh step 13a)
    nftables
    # building virt-rdma inside the root (build-root.sh), with the same
    # dependencies as on Debian 12 plus GnuTLS for the helper channel
    gcc libc6-dev meson ninja-build pkg-config cpio xz-utils
    libibverbs-dev librdmacm-dev libvirt-dev libxml2-dev libxml2-utils
    libglib2.0-dev libgnutls28-dev libjson-glib-dev gnutls-bin
    # what the unit suite checks there too: the man pages (rst2man), the
    # multiarch library directory the install layout expects (meson asks
    # dpkg-architecture), the AppArmor abstractions (apparmor_parser), the
    # translation (xgettext, msgfmt: the .mo files; locales: the German
    # locale the translation test makes with localedef)
    python3-docutils dpkg-dev apparmor gettext locales
    # the metrics file read back by a real Prometheus parser
    python3-prometheus-client python3-jsonschema
)

if [ "$(id -u)" != 0 ]; then
    echo "mkroot.sh: run as root (mmdebstrap's root mode keeps the files' real owners)" >&2
    exit 1
fi
command -v mmdebstrap >/dev/null ||
    { echo "mkroot.sh: mmdebstrap is missing: apt-get install mmdebstrap" >&2; exit 1; }

# The archive apt already reaches (or $VRM_COMPAT_MIRROR)
mirror=$(bash "$(dirname "$0")/../../tools/debian-mirror.sh")

stamp="$suite ${packages[*]} $(sha256sum "$0" | cut -d' ' -f1)"
if [ -d "$root" ] && [ "$(cat "$root.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "mkroot.sh: $root is up to date"
    exit 0
fi

rm -rf "$root" "$root.stamp" "$root.tmp"
mkdir -p "$(dirname "$root")"
hooks=()
if [ -n "$cache" ]; then
    mkdir -p "$cache"
    hooks+=(--setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives && cp -a \"$cache\"/. \"\$1\"/var/cache/apt/archives/ 2>/dev/null || true"
            --customize-hook="cp -a \"\$1\"/var/cache/apt/archives/*.deb \"$cache\"/ 2>/dev/null || true")
fi
# What a TCG sandbox host never uses: kernel drivers for hardware it does
# not have, the other QEMU system emulators, the LTO dumper and the
# sanitizer run-times of the compiler (the compat build is not sanitized).
excludes=()
for p in sound drivers/gpu drivers/media drivers/net/wireless drivers/net/ethernet \
         drivers/bluetooth drivers/staging drivers/iio drivers/usb drivers/hid \
         drivers/input drivers/scsi drivers/ata drivers/mtd drivers/hwmon \
         drivers/platform drivers/misc drivers/mfd drivers/md net/wireless \
         net/mac80211 net/bluetooth fs/ocfs2 fs/xfs fs/btrfs fs/nfs fs/smb; do
    excludes+=(--dpkgopt="path-exclude=/usr/lib/modules/*/kernel/$p/*")
done
for p in /usr/bin/qemu-system-i386 /usr/bin/qemu-system-x86_64-microvm \
         '/usr/bin/*-lto-dump-*' '/usr/lib/gcc/x86_64-linux-gnu/*/lto1' \
         '/usr/lib/x86_64-linux-gnu/lib*san.so*'; do
    excludes+=(--dpkgopt="path-exclude=$p")
done
start=$SECONDS
# minbase + the list, no recommends; documentation, manuals and locales are
# never unpacked; the kernel's own initramfs is not generated (the sandbox
# makes its own), nor is apt's cache kept in the root. In a private mount
# namespace: whatever mmdebstrap mounts in the root (/proc, /sys, devices)
# goes away with it, even when it is killed, so that removing the build
# tree never reaches this machine's /dev or /sys.
unshare --mount --propagation private mmdebstrap --mode=root --variant=minbase --format=directory \
    --include="$(IFS=,; echo "${packages[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt=force-unsafe-io \
    "${excludes[@]}" \
    --dpkgopt='path-exclude=/etc/kernel/postinst.d/initramfs-tools' \
    --dpkgopt=force-confold \
    --essential-hook='mkdir -p "$1/etc/initramfs-tools" && echo update_initramfs=no > "$1/etc/initramfs-tools/update-initramfs.conf"' \
    "${hooks[@]}" \
    --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/*_Packages' \
    "$suite" "$root.tmp" "$mirror"
mv "$root.tmp" "$root"
echo "$stamp" > "$root.stamp"
echo "mkroot.sh: $suite root in $root: $((SECONDS - start)) s, $(du -sh "$root" | cut -f1)"
