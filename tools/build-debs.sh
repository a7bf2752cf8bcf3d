#!/bin/bash
# build-debs.sh [OUTDIR]: build virt-rdma's Debian packages from this tree
# with Debian's own tools (dpkg-buildpackage -b -us -uc, debhelper, meson)
# and put the .deb files in OUTDIR (default: build-deb/ at the top of the
# tree). The build runs in a copy of the tree, because dpkg-buildpackage
# builds inside the source directory and writes its results beside it.
#
# The build dependencies are those of debian/control; tools/install-deps.sh
# installs them. DEB_BUILD_OPTIONS is passed on (nocheck skips the unit
# suite, parallel=N sets the jobs).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$top/build-deb}
command -v dpkg-buildpackage >/dev/null ||
    { echo "build-debs.sh: dpkg-buildpackage not found: apt-get install dpkg-dev debhelper (or run tools/install-deps.sh)" >&2; exit 1; }

version=$(dpkg-parsechangelog -l "$top/debian/changelog" -S Version)
work=$(mktemp -d "${TMPDIR:-/tmp}/virt-rdma-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The unit suite runs programs as other users, who must reach the tree.
chmod 0755 "$work"
src=$work/virt-rdma-$version
mkdir -p "$src" "$out"

# The files of the tree, without build directories or other ignored files.
bash "$top/tools/copy-tree.sh" "$top" "$src"

log=$out/build.log
echo "build-debs.sh: building virt-rdma $version in $src (log: $log)"
if ! (cd "$src" && dpkg-buildpackage -b -us -uc) > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "build-debs.sh: dpkg-buildpackage failed; the whole log is $log" >&2
    exit 1
fi
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mv "$work"/*.deb "$work"/*.changes "$work"/*.buildinfo "$out"/
echo "build-debs.sh: packages in $out:"
ls -1 "$out"/*.deb
