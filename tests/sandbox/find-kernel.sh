#!/bin/sh
# Print the version of the newest installed Debian kernel that has
# rdma_rxe and the 9p modules; the sandbox VMs boot it. Fails with the
# package to install when there is none.
set -eu
best=
for k in /boot/vmlinuz-*; do
    [ -e "$k" ] || continue
    ver=${k#/boot/vmlinuz-}
    mods=/lib/modules/$ver
    [ -r "$k" ] || continue
    if find "$mods" -name 'rdma_rxe.ko*' 2>/dev/null | grep -q . &&
       find "$mods" -name '9p.ko*' 2>/dev/null | grep -q .; then
        best=$ver
    fi
done
if [ -z "$best" ]; then
    echo "no kernel with rdma_rxe and 9p modules in /boot and /lib/modules; install one with: apt-get install linux-image-amd64" >&2
    exit 1
fi
echo "$best"
