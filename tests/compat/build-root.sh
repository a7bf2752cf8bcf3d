#!/bin/bash
# build-root.sh ROOT SRCDIR BUILDDIR: build virt-rdma inside the Debian
# root ROOT (mkroot.sh), with that root's compiler and libraries, into
# BUILDDIR. The binaries link against the root's libvirt, GLib, libibverbs
# and librdmacm, as a distribution package built there would.
#
# SRCDIR and BUILDDIR are bind-mounted into ROOT at their own paths, in a
# private mount namespace (nothing stays mounted afterwards), so the build
# tree's absolute paths are the same in the chroot, on this machine and in
# the sandbox VMs that boot ROOT (vrm-sandbox --root binds them there too).
# An existing BUILDDIR is rebuilt incrementally.
set -euo pipefail

root=${1:?usage: build-root.sh ROOT SRCDIR BUILDDIR}
src=$(cd "${2:?usage: build-root.sh ROOT SRCDIR BUILDDIR}" && pwd)
build=${3:?usage: build-root.sh ROOT SRCDIR BUILDDIR}
mkdir -p "$build"
build=$(cd "$build" && pwd)
root=$(cd "$root" && pwd)
[ -x "$root/usr/bin/meson" ] || { echo "build-root.sh: $root has no meson; make it with mkroot.sh" >&2; exit 1; }

# The sandbox tiers are configured too: they build the e2e guest and the
# streams test program that the compat scenarios and the benchmark run.
inner="set -e
cd '$build'
if [ ! -f build.ninja ]; then
    wipe=
    [ -d meson-private ] && wipe=--wipe
    meson setup \$wipe . '$src' -Dsandbox_tests=true
fi
ninja"
exec unshare --mount --propagation private bash -euc '
root=$1 src=$2 build=$3 inner=$4
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/tmp"
mkdir -p "$root$src" "$root$build"
mount --bind "$src" "$root$src"
mount --bind "$build" "$root$build"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
    bash -c "$inner"
' build-root "$root" "$src" "$build" "$inner"
