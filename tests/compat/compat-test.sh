#!/bin/bash
# compat-test.sh DISTRO KIND [SCENARIO...]: one entry of the compatibility
# matrix: the e2e scenarios (tests/e2e) on sandbox hosts of Debian DISTRO.
#
#   DISTRO 12   this machine's root and kernel, this build tree's binaries
#   DISTRO 13   a Debian 13 root made with mmdebstrap in the build tree
#               (mkroot.sh) booting its own kernel, and virt-rdma built
#               inside that root (build-root.sh)
#
#   KIND root       make (or keep) the Debian 13 root and build virt-rdma in
#                   it; print the time it took and the root's size
#   KIND unit       the unit suite of that distribution's build (Debian 13:
#                   inside the root, with its libraries)
#   KIND migrate S  rdma-migrate.sh with the scenarios S (several in one
#                   boot, one after the other on the same daemons)
#   KIND negotiation S  negotiation.sh scenario S: plain virsh, virt-rdma
#                   migrate and libvirt-python over the helpers' negotiation
#   KIND native     QEMU's own rdma: migration through libvirt, the
#                   reference (native-rdma.sh); its outcome is printed
#                   either way and it fails when the migration fails
#   KIND tcp        plain libvirt TCP migration (tcp-baseline.sh)
#
# Environment (meson sets them): VRM_SOURCE_DIR, VRM_BUILD_DIR (the
# Debian 12 build tree); VRM_COMPAT_APT_CACHE keeps downloaded packages
# outside the build tree (default: in it). Run sandbox boots under the
# sandbox lock (flock /tmp/vrm-sandbox.lock).
set -u -o pipefail
distro=${1:?usage: compat-test.sh DISTRO KIND [SCENARIO...]}
kind=${2:?usage: compat-test.sh DISTRO KIND [SCENARIO...]}
shift 2
src=${VRM_SOURCE_DIR:?}
host_build=${VRM_BUILD_DIR:?}
# Outside the build tree's tests/: tests/layering skips objects below a
# path with /tests/ in it.
compat=$host_build/compat
sandbox=$host_build/tests/sandbox/vrm-sandbox
e2e=$src/tests/e2e

die() { echo "compat-test.sh: $*" >&2; exit 1; }

case "$distro" in
    12)
        build=$host_build
        boot=(--distro 12)
        native_env= ;;
    13)
        dir=$compat/debian-13
        build=$dir/build
        boot=(--distro 13)
        # QEMU's own rdma: migration without --postcopy (native-rdma.sh)
        native_env=VRM_NATIVE_RDMA_POSTCOPY=0
        # The root and the build, made once per build tree (several tests
        # may ask; one makes them, the others wait and find them made).
        mkdir -p "$dir"
        exec {lock}> "$dir.lock"
        flock "$lock"
        start=$SECONDS
        bash "$src/tests/compat/mkroot.sh" trixie "$dir/root" "${VRM_COMPAT_APT_CACHE:-$dir/apt-cache}" \
            > "$dir/mkroot.log" 2>&1 || { tail -30 "$dir/mkroot.log"; die "making the Debian 13 root failed (log: $dir/mkroot.log)"; }
        root_s=$((SECONDS - start))
        start=$SECONDS
        bash "$src/tests/compat/build-root.sh" "$dir/root" "$src" "$build" > "$dir/build.log" 2>&1 ||
            { tail -30 "$dir/build.log"; die "building virt-rdma inside the Debian 13 root failed (log: $dir/build.log)"; }
        build_s=$((SECONDS - start))
        flock -u "$lock" ;;
    *) die "unknown distribution '$distro' (12 or 13)" ;;
esac

# in_root COMMAND...: run COMMAND in the Debian 13 root, the source and
# build trees at their own paths, in a private mount namespace.
in_root() {
    unshare --mount --propagation private bash -euc '
        root=$1 src=$2 build=$3
        shift 3
        mount -t proc proc "$root/proc"
        mount -t tmpfs tmpfs "$root/tmp"
        mkdir -p "$root/dev/shm" && mount -t tmpfs tmpfs "$root/dev/shm"
        mkdir -p "$root$src" "$root$build"
        mount --bind "$src" "$root$src"
        mount --bind "$build" "$root$build"
        exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 "$@"
    ' in_root "$dir/root" "$src" "$build" "$@"
}

# sandbox COMMAND: both hosts run COMMAND with this distribution's build.
sandbox() {
    local cmd="$native_env VRM_GUEST_ELF=$build/tests/e2e/guest/vrm-guest.elf VRM_BUILD_DIR=$build $1"
    "$sandbox" "${boot[@]}" --hosts 2 --mem 2048 --timeout "${VRM_COMPAT_TIMEOUT:-1400}" \
        --a "$cmd" --b "$cmd"
}

case "$kind" in
    root)
        [ "$distro" = 13 ] || die "the Debian 12 tier runs on this machine's own root"
        grep "mkroot.sh:" "$dir/mkroot.log"
        echo "root: ${root_s}s (this run), $(du -sh --one-file-system "$dir/root" | cut -f1)"
        echo "virt-rdma built inside it: ${build_s}s (this run; incremental when the build existed)"
        for p in linux-image-amd64 libvirt-daemon qemu-system-x86 rdma-core iproute2 gcc libglib2.0-dev libgnutls28-dev; do
            chroot "$dir/root" dpkg-query -W -f '${Package} ${Version}\n' "$p" || die "$p is missing in the root"
        done
        # the binaries are the root's: linked against its libvirt (grep
        # reads all of ldd's output: with -q it could stop first, and ldd's
        # SIGPIPE failed the pipeline under pipefail, as a CI run saw)
        in_root ldd "$build/tools/cli/virt-rdma" | grep 'libvirt.so.0 => /lib/x86_64-linux-gnu/' > /dev/null ||
            die "virt-rdma in $build does not link the root's libvirt" ;;
    unit)
        if [ "$distro" = 13 ]; then
            in_root meson test -C "$build" --suite unit --print-errorlogs
        else
            meson test -C "$build" --suite unit --print-errorlogs
        fi ;;
    migrate)
        [ $# -gt 0 ] || die "migrate needs scenarios"
        sandbox "bash $e2e/rdma-migrate.sh $*" ;;
    negotiation)
        [ $# -eq 1 ] || die "negotiation needs one scenario"
        sandbox "bash $e2e/negotiation.sh $1" ;;
    native)
        sandbox "bash $e2e/native-rdma.sh" ;;
    tcp)
        sandbox "bash $e2e/tcp-baseline.sh" ;;
    *) die "unknown kind '$kind'" ;;
esac
