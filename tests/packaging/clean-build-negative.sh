#!/bin/bash
# clean-build-negative.sh SUITE ROOTDIR: the negative twin of the clean-root
# package build (tools/build-debs-clean.sh). The same build with
# libgnutls28-dev removed from Build-Depends must fail, and fail where
# meson looks for GnuTLS: the clean root really holds only what
# debian/control asks for, so a missing line is a failed build and not a
# package that happened to be installed on the build machine.
#
# tests/run-all.sh runs it beside the clean build, from the same root.
set -u
suite=${1:?usage: clean-build-negative.sh SUITE ROOTDIR}
rootdir=${2:?usage: clean-build-negative.sh SUITE ROOTDIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

if DEB_BUILD_OPTIONS="nocheck ${DEB_BUILD_OPTIONS:-}" \
   bash "$top/tools/build-debs-clean.sh" --drop libgnutls28-dev "$suite" "$out" "$rootdir" > "$out/run.log" 2>&1; then
    cat "$out/run.log"
    echo "FAIL: the clean $suite build without libgnutls28-dev succeeded"
    exit 1
fi
# meson.build's own error, which names the package to install
why='ERROR: .*gnutls .*not found.*apt-get install libgnutls28-dev'
if ! grep -qE "$why" "$out/build.log"; then
    tail -30 "$out/build.log"
    echo "FAIL: the clean $suite build without libgnutls28-dev failed, but not where meson looks for gnutls"
    exit 1
fi
echo "ok: the clean $suite build without libgnutls28-dev fails: $(grep -m1 -oE "$why" "$out/build.log")"
