#!/bin/sh
# mkinitramfs.sh KVER INIT OUTPUT [ROOT]
#
# Build the sandbox's stage-1 initramfs: a static busybox, the modules that
# mounting the host's root needs (virtio PCI, 9p, overlay) in dependency
# order, and INIT as /init. Everything else (rdma_rxe, virtio_net) is loaded
# in stage 2 from the booted root's /lib/modules, seen through 9p.
# With ROOT (another distribution's root, vrm-sandbox --root), the modules
# and the busybox come from ROOT, whose kernel the VM boots.
set -eu
kver=$1
init=$2
out=$3
root=${4:-}

if [ -n "$root" ]; then
    busybox=
    for b in "$root/usr/bin/busybox" "$root/bin/busybox"; do
        [ -x "$b" ] && { busybox=$b; break; }
    done
    [ -n "$busybox" ] || { echo "no busybox in $root: install busybox-static there" >&2; exit 1; }
else
    busybox=$(command -v busybox || true)
    if [ -z "$busybox" ] || ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
        for b in /bin/busybox /usr/bin/busybox; do
            if [ -x "$b" ] && "$b" --list >/dev/null 2>&1; then busybox=$b; fi
        done
    fi
    [ -n "$busybox" ] || { echo "busybox not found: apt-get install busybox-static" >&2; exit 1; }
fi
if ldd "$busybox" >/dev/null 2>&1; then
    echo "$busybox is dynamically linked; the initramfs needs a static one: apt-get install busybox-static" >&2
    exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/lib/modules" "$work/proc" "$work/sys" "$work/dev" \
         "$work/lower" "$work/upper" "$work/newroot"
cp "$busybox" "$work/bin/busybox"
for applet in sh mount umount insmod mkdir switch_root cat echo sleep poweroff ls; do
    ln -s busybox "$work/bin/$applet"
done
cp "$init" "$work/init"
chmod 755 "$work/init"

# Resolve the dependency order with modinfo: every module after the ones it
# depends on.
modinfo_k() { modinfo ${root:+-b "$root"} -k "$kver" "$@"; }
order=""
add_module() {
    case " $order " in *" $1 "*) return 0 ;; esac
    deps=$(modinfo_k -F depends "$1" | tr ',' ' ')
    for d in $deps; do add_module "$d"; done
    order="$order $1"
}
for m in virtio_pci 9pnet_virtio 9p overlay; do
    add_module "$m"
done
: > "$work/modules.order"
for m in $order; do
    path=$(modinfo_k -n "$m")
    # kmod 30 (Debian 12) prints "builtin", kmod 34 (Debian 13) "(builtin)"
    case "$path" in
        builtin|'(builtin)') continue ;;
        (*.ko.xz) xz -dc "$path" > "$work/lib/modules/$m.ko" ;;
        (*.ko.zst) zstd -qdc "$path" > "$work/lib/modules/$m.ko" ;;
        (*) cp "$path" "$work/lib/modules/$m.ko" ;;
    esac
    echo "$m" >> "$work/modules.order"
done

(cd "$work" && find . | cpio -o -H newc --quiet) | gzip -9 > "$out.tmp"
mv "$out.tmp" "$out"
