#!/bin/bash
# build-debs-clean.sh [--drop PACKAGE] [--lintian] [--autopkgtest]
#                     SUITE OUTDIR [ROOTDIR]
# Build virt-rdma's Debian packages as a distribution's buildd would, in a
# clean root that holds only what debian/control asks for.
#
#   1. a buildd-variant root of SUITE (bookworm, trixie) made with
#      mmdebstrap from the Debian archive apt on this machine uses, kept in
#      ROOTDIR (default: build-clean/ at the top of the tree) while its
#      stamp matches; it is never changed afterwards
#   2. every build runs in an overlay over that root (a private mount
#      namespace: nothing stays mounted, the root stays clean): `apt-get
#      build-dep ./` from the tree's debian/control alone, then
#      `dpkg-buildpackage -b -us -uc` with the unit suite (DEB_BUILD_OPTIONS
#      is passed on)
#   3. the .deb, .changes and .buildinfo files and build.log go to OUTDIR
#   4. with --lintian, SUITE's own lintian (--pedantic, informational tags
#      too) checks them in the same root; its output is OUTDIR/lintian.log,
#      its verdict OUTDIR/lintian.status (passed or failed)
#   5. with --autopkgtest, debian/tests run against them (autopkgtest's null
#      test bed: a fresh overlay over the clean root); OUTDIR/autopkgtest.log
#      and OUTDIR/autopkgtest.status
#
# Exit status: 0 all done; 3 the packages are in OUTDIR but lintian or
# autopkgtest failed; anything else: no packages.
#
# --drop PACKAGE removes PACKAGE's line from the copy's Build-Depends first:
# the negative twin (tests/packaging/clean-build-negative.sh) shows that the
# clean build then fails. As root (mmdebstrap's root mode, chroot, mounts).
#
# Environment: VRM_COMPAT_MIRROR overrides the archive's URL.
set -euo pipefail

drop= lintian=0 lint_failed=0 autopkgtest=0 apt_failed=0
while [ $# -gt 0 ]; do
    case "$1" in
        --drop) drop=${2:?--drop needs a package}; shift 2 ;;
        --lintian) lintian=1; shift ;;
        --autopkgtest) autopkgtest=1; shift ;;
        *) break ;;
    esac
done
suite=${1:?usage: build-debs-clean.sh [--drop PACKAGE] [--lintian] [--autopkgtest] SUITE OUTDIR [ROOTDIR]}
out=${2:?usage: build-debs-clean.sh [--drop PACKAGE] [--lintian] [--autopkgtest] SUITE OUTDIR [ROOTDIR]}
top=$(cd "$(dirname "$0")/.." && pwd)
rootdir=${3:-$top/build-clean}

die() { echo "build-debs-clean.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (mmdebstrap's root mode, chroot and mounts need it)"
for tool in mmdebstrap dpkg-parsechangelog; do
    command -v "$tool" > /dev/null || die "$tool is missing: apt-get install mmdebstrap dpkg-dev (or run tools/install-deps.sh)"
done

# The archive apt already reaches (or $VRM_COMPAT_MIRROR)
mirror=$(bash "$top/tools/debian-mirror.sh")

mkdir -p "$rootdir" "$out"
rootdir=$(cd "$rootdir" && pwd)
out=$(cd "$out" && pwd)
root=$rootdir/$suite-buildd
# The downloaded .deb files, shared by every build from this root.
cache=$rootdir/$suite-apt-cache
mkdir -p "$cache"

# 1. The root: buildd variant (essential, apt, build-essential), nothing else.
# (the packages keep their manuals and documentation: the root is also the
# autopkgtest's test bed, where the installed man pages are checked)
recipe=2    # raise when the root's making below changes
stamp="$suite buildd $mirror recipe $recipe"
if [ ! -d "$root" ] || [ "$(cat "$root.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$root" "$root.stamp" "$root.tmp"
    start=$SECONDS
    unshare --mount --propagation private mmdebstrap --mode=root --variant=buildd --format=directory \
        --dpkgopt=force-unsafe-io \
        --setup-hook="mkdir -p \"\$1\"/var/cache/apt/archives && cp -a \"$cache\"/. \"\$1\"/var/cache/apt/archives/ 2>/dev/null || true" \
        --customize-hook="cp -a \"\$1\"/var/cache/apt/archives/*.deb \"$cache\"/ 2>/dev/null || true" \
        --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb' \
        "$suite" "$root.tmp" "$mirror" > "$rootdir/$suite-mmdebstrap.log" 2>&1 ||
        { tail -20 "$rootdir/$suite-mmdebstrap.log" >&2; die "mmdebstrap of $suite failed (log: $rootdir/$suite-mmdebstrap.log)"; }
    mv "$root.tmp" "$root"
    echo "$stamp" > "$root.stamp"
    echo "build-debs-clean.sh: $suite buildd root in $root: $((SECONDS - start)) s"
fi

# 2. The tree's files (no build directories) in a work directory.
version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
work=$(mktemp -d "${TMPDIR:-/tmp}/virt-rdma-clean.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM    # (so that the EXIT trap runs)
chmod 0755 "$work"
mkdir -p "$work/src/virt-rdma-$version"
bash "$top/tools/copy-tree.sh" "$top" "$work/src/virt-rdma-$version"
if [ -n "$drop" ]; then
    control=$work/src/virt-rdma-$version/debian/control
    grep -qE "^ $drop( |,|\$)" "$control" || die "debian/control has no Build-Depends line for '$drop'"
    sed -i -E "/^ $drop( |,|\$)/d" "$control"
    echo "build-debs-clean.sh: Build-Depends without $drop (the negative twin)"
fi

# in_root LAYER LOG SCRIPT [offline]: run SCRIPT in an overlay over the
# clean root whose changes go to the layer LAYER (kept between calls),
# output to LOG; with "offline", in a network namespace of its own with
# only a loopback device, as Debian's buildds build (and so that two
# builds' tests never meet on 127.0.0.0/8)
in_root() {
    local net=()
    [ "${4:-}" = offline ] && net=(--net)
    mkdir -p "$work/$1.upper" "$work/$1.ovl" "$work/$1.merged"
    unshare --mount --propagation private "${net[@]}" bash -euc '
    root=$1 work=$2 cache=$3 inner=$4 opts=$5 layer=$6 offline=$7
    [ -z "$offline" ] || ip link set lo up
    m=$work/$layer.merged
    mount -t overlay overlay -o "lowerdir=$root,upperdir=$work/$layer.upper,workdir=$work/$layer.ovl" "$m"
    mount -t proc proc "$m/proc"
    mount -t tmpfs tmpfs "$m/tmp"
    mkdir -p "$m/dev/shm" "$m/build" "$m/var/cache/apt/archives"
    mount -t tmpfs tmpfs "$m/dev/shm"
    mount --bind "$work/src" "$m/build"
    mount --bind "$cache" "$m/var/cache/apt/archives"
    cp /etc/resolv.conf "$m/etc/resolv.conf"
    exec chroot "$m" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive DEB_BUILD_OPTIONS="$opts" bash -c "$inner"
    ' build-debs-clean "$root" "$work" "$cache" "$3" "${DEB_BUILD_OPTIONS:-}" "$1" "${net[*]}" > "$2" 2>&1
}

log=$out/build.log
rm -f "$out/lintian.status" "$out/autopkgtest.status"
echo "build-debs-clean.sh: building virt-rdma $version in a clean $suite root (log: $log)"
if ! in_root build "$log" "set -e
cd /build/virt-rdma-$version
echo '== apt-get build-dep ./ (debian/control alone)'
apt-get update -q
apt-get build-dep -y -q --no-install-recommends ./" ||
   ! in_root build "$log.2" "set -e
cd /build/virt-rdma-$version
echo '== dpkg-buildpackage -b -us -uc (DEB_BUILD_OPTIONS='\"\${DEB_BUILD_OPTIONS:-}\"'), no network'
dpkg-buildpackage -b -us -uc" offline; then
    cat "$log.2" >> "$log" 2>/dev/null
    rm -f "$log.2"
    tail -n 40 "$log" >&2
    die "the clean $suite build failed; the whole log is $log"
fi
cat "$log.2" >> "$log"
rm -f "$log.2"

# The distribution's own lintian on the packages, in the same root after
# the build: errors, warnings and info tags not overridden (with their
# reason, in debian/*.lintian-overrides) fail.
if [ "$lintian" = 1 ]; then
    if ! in_root build "$out/lintian.log" "set -e
apt-get install -y -q --no-install-recommends lintian > /dev/null
echo \"lintian \$(dpkg-query -W -f '\${Version}' lintian) --pedantic on $suite\"
cd /build && lintian -I --pedantic --fail-on error,warning,info ./*.changes"; then
        lint_failed=1
    fi
    [ "$lint_failed" = 0 ] && echo passed > "$out/lintian.status" || echo failed > "$out/lintian.status"
    cat "$out/lintian.log"
fi

# autopkgtest (debian/tests) against the built packages, in a fresh overlay
# over the clean root: the test bed holds the packages and what the tests
# depend on, nothing of the build. Every test must pass; a skipped one is
# a failure.
if [ "$autopkgtest" = 1 ]; then
    if ! in_root autopkgtest "$out/autopkgtest.log" "set -e
apt-get update -q > /dev/null
apt-get install -y -q --no-install-recommends autopkgtest > /dev/null
echo \"autopkgtest \$(dpkg-query -W -f '\${Version}' autopkgtest) on $suite, test bed: this root (null)\"
cd /build
autopkgtest --no-built-binaries --output-dir /tmp/autopkgtest ./*.deb ./virt-rdma-$version/ -- null
echo '== summary'
cat /tmp/autopkgtest/summary
! grep -qv ' PASS' /tmp/autopkgtest/summary"; then
        apt_failed=1
    fi
    [ "$apt_failed" = 0 ] && echo passed > "$out/autopkgtest.status" || echo failed > "$out/autopkgtest.status"
    cat "$out/autopkgtest.log"
fi

# 3. The results.
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mv "$work"/src/*.deb "$work"/src/*.changes "$work"/src/*.buildinfo "$out"/
echo "build-debs-clean.sh: packages in $out:"
ls -1 "$out"/*.deb
# Exit 3: the packages built, a check of them failed (the logs say which).
[ "$lint_failed" = 0 ] || echo "build-debs-clean.sh: lintian on the $suite packages failed (log: $out/lintian.log)" >&2
[ "$apt_failed" = 0 ] || echo "build-debs-clean.sh: autopkgtest of the $suite packages failed (log: $out/autopkgtest.log)" >&2
[ "$lint_failed$apt_failed" = 00 ] || exit 3
