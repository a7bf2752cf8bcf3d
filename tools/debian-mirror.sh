#!/bin/bash
# debian-mirror.sh: print the Debian archive's URL that the roots made with
# mmdebstrap use (tests/compat/mkroot.sh, tools/build-debs-clean.sh):
# $VRM_COMPAT_MIRROR if set, else the first Debian URI in this machine's
# apt sources (the archive apt already reaches), else deb.debian.org.
set -uo pipefail
mirror=${VRM_COMPAT_MIRROR:-}
if [ -z "$mirror" ]; then
    mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
             grep -oE '(https?|file)://[^ ]*/debian/?( |$)' | head -1 | tr -d ' ')
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
echo "$mirror"
