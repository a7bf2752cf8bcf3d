#!/bin/bash
# build-depends-negative.sh: the negative twin of build-depends.py. A copy
# of debian/control without libgnutls28-dev, one whose glib is older than
# meson.build needs, and one that keeps gnutls-bin for a profile other
# than the unit tests' must each fail, naming the package.
#
#   build-depends-negative.sh CHECKER MESON_BUILD DEBIAN_CONTROL
set -u
checker=$1 meson_build=$2 control=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

expect() {  # NAME SED-EXPRESSION PATTERN
    local out
    sed -e "$2" "$control" > "$tmp/$1"
    if cmp -s "$tmp/$1" "$control"; then
        echo "FAIL: $1: the edit changed nothing (debian/control changed?)"; rc=1; return
    fi
    if out=$(python3 "$checker" "$meson_build" "$tmp/$1"); then
        echo "FAIL: $1: the check passed"; rc=1; return
    fi
    if ! grep -qE "$3" <<<"$out"; then
        echo "FAIL: $1: the check did not say '$3':"; echo "$out"; rc=1; return
    fi
    echo "ok: $1: $(grep -E "$3" <<<"$out")"
}

expect no-gnutls '/^ libgnutls28-dev/d' \
    'libgnutls28-dev \(>=3.6.5\) is needed by meson.build but not in Build-Depends'
expect old-glib 's/libglib2.0-dev (>= [0-9.]*)/libglib2.0-dev (>= 2.50)/' \
    'libglib2.0-dev: Build-Depends asks \(>=2.50\)'
expect certtool-nodoc 's/^ gnutls-bin <!nocheck>/ gnutls-bin <!nodoc>/' \
    'gnutls-bin is in Build-Depends only for <!nodoc>'
exit $rc
