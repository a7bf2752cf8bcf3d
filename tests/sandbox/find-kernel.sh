#!/bin/sh
# find-kernel.sh [ROOT]: print the version of the newest installed Debian
# kernel that has rdma_rxe and the 9p modules; the sandbox VMs boot it.
# With ROOT, look in that root's /boot and /lib/modules instead of this
# machine's. Fails with the package to install when there is none.
set -eu
root=${1:-}
best=
for k in "$root"/boot/vmlinuz-*; do
    [ -e "$k" ] || continue
    ver=${k#"$root"/boot/vmlinuz-}
    mods=$root/lib/modules/$ver
    [ -r "$k" ] || continue
    if find "$mods" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q . &&
       find "$mods" -name '9p.ko*' 2>/dev/null | grep -q .; then
        best=$ver
    fi
done
if [ -z "$best" ]; then
    echo "no kernel with rdma_rxe and 9p modules in $root/boot and $root/lib/modules; install one with: apt-get install linux-image-amd64" >&2
    exit 1
fi
echo "$best"
