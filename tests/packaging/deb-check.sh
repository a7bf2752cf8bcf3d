#!/bin/bash
# deb-check.sh DEB_DIR: what the built packages hold, checked from the
# .deb files of tools/build-debs.sh (tests/run-all.sh runs it).
#
#   - the FHS paths are in the right packages;
#   - virt-rdmad's conffiles are its configuration and AppArmor
#     abstractions, and the hook is a link, not a conffile;
#   - a program including <virt-rdma/virt-rdma.h> builds with the
#     pkg-config file of libvirtrdma-dev and runs on libvirtrdma0;
#   - libvirtrdma0 exports only the public API (nm -D --defined-only).
set -uo pipefail

dir=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
deb() { ls "$dir/$1"_*.deb 2>/dev/null | head -1; }

for p in virt-rdmad virt-rdma libvirtrdma0 libvirtrdma-dev virt-rdma-common; do
    [ -n "$(deb $p)" ] || { echo "FAIL: no $p package in $dir"; exit 1; }
done

# has PACKAGE PATH...: the package holds each path
has() {
    local p=$1 f; shift
    dpkg-deb -c "$(deb "$p")" | awk '{print $6}' | sed 's|^\.||' > "$tmp/list-$p"
    for f in "$@"; do
        grep -qx "$f" "$tmp/list-$p" || bad "$p does not hold $f"
    done
}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
has virt-rdmad /usr/sbin/virt-rdmad /usr/sbin/virt-rdma-hook \
    /usr/libexec/virt-rdma/virt-rdma-engine /etc/libvirt/hooks/qemu.d/virt-rdma \
    /etc/virt-rdma/virt-rdmad.conf /lib/systemd/system/virt-rdmad.service \
    /lib/systemd/system/virt-rdmad.socket /etc/apparmor.d/abstractions/virt-rdma-qemu \
    /etc/apparmor.d/abstractions/virt-rdma-libvirtd /etc/apparmor.d/abstractions/libvirt-qemu.d/virt-rdma
has virt-rdma /usr/bin/virt-rdma
has libvirtrdma0 "/usr/lib/$multiarch/libvirtrdma.so.0" "/usr/lib/$multiarch/libvirtrdma.so.0.1.0"
has libvirtrdma-dev /usr/include/virt-rdma/virt-rdma.h "/usr/lib/$multiarch/libvirtrdma.so" \
    "/usr/lib/$multiarch/pkgconfig/virt-rdma.pc"
has virt-rdma-common /usr/share/virt-rdma/schemas/migration.rng \
    /usr/share/locale/de/LC_MESSAGES/virt-rdma.mo

dpkg-deb -e "$(deb virt-rdmad)" "$tmp/control"
printf '%s\n' /etc/apparmor.d/abstractions/libvirt-qemu.d/virt-rdma \
    /etc/apparmor.d/abstractions/virt-rdma-libvirtd \
    /etc/apparmor.d/abstractions/virt-rdma-qemu /etc/virt-rdma/virt-rdmad.conf > "$tmp/conffiles"
diff -u "$tmp/conffiles" "$tmp/control/conffiles" || bad "virt-rdmad's conffiles are not the expected ones"
grep -q 'addgroup --quiet --system virt-rdma$' "$tmp/control/postinst" ||
    bad "virt-rdmad's postinst does not create the group virt-rdma"
grep -q 'virt-rdma-engine$' "$tmp/control/postinst" ||
    bad "virt-rdmad's postinst does not create the user virt-rdma-engine"
grep -q "deb-systemd-helper enable 'virt-rdmad.socket'" "$tmp/control/postinst" ||
    bad "virt-rdmad's postinst does not enable virt-rdmad.socket"

root=$tmp/root
for p in libvirtrdma0 libvirtrdma-dev; do dpkg-deb -x "$(deb $p)" "$root"; done
cat > "$tmp/app.c" <<'C'
#include <stdio.h>
#include <virt-rdma/virt-rdma.h>

#if !VIRT_RDMA_CHECK_VERSION(0, 1, 0)
# error "VIRT_RDMA_CHECK_VERSION(0, 1, 0) is false"
#endif

int
main(void)
{
    printf("libvirtrdma %d.%d.%d: %s\n", VIRT_RDMA_VERSION_MAJOR, VIRT_RDMA_VERSION_MINOR,
           VIRT_RDMA_VERSION_MICRO, vrmLastErrorMessage() ? "error message" : "no error");
    return 0;
}
C
export PKG_CONFIG_PATH=$root/usr/lib/$multiarch/pkgconfig
flags=$(pkg-config --define-variable=prefix="$root/usr" --cflags --libs virt-rdma) ||
    bad "pkg-config virt-rdma fails with libvirtrdma-dev"
if cc -Wall -Werror -o "$tmp/app" "$tmp/app.c" $flags 2> "$tmp/cc.log"; then
    LD_LIBRARY_PATH=$root/usr/lib/$multiarch "$tmp/app" || bad "the program does not run on libvirtrdma0"
else
    cat "$tmp/cc.log"; bad "a program does not build against libvirtrdma-dev"
fi
echo "nm -D --defined-only libvirtrdma.so.0 (package libvirtrdma0):"
nm -D --defined-only "$root/usr/lib/$multiarch/libvirtrdma.so.0" | tee "$tmp/nm" | sed 's/^/    /'
awk '$2 != "A" {print $3}' "$tmp/nm" | grep -qv '^vrm[A-Za-z0-9]*@@VIRT_RDMA_' &&
    bad "libvirtrdma0 exports more than versioned vrm* functions"

[ $fail = 0 ] && echo "ok: packages hold the FHS paths, conffiles and users as expected; a program builds against libvirtrdma-dev"
exit $fail
