#!/bin/bash
# install-layout.sh BUILD_DIR SOURCE_DIR [SANITIZE]: `meson install` with the default
# prefix (/usr) gives the FHS layout of the Debian package, the installed
# pieces agree with each other, and a program builds against the installed
# library the way the README says.
#
#   - the installed files are exactly the expected list (hook at
#     /etc/libvirt/hooks/qemu.d/virt-rdma, engine in /usr/libexec/virt-rdma);
#   - the hook link, the unit's ExecStart and the engine path compiled into
#     virt-rdmad (its --help) point at installed programs;
#   - every absolute path virt-rdmad --help prints appears in virt-rdmad(8);
#   - the socket unit listens where virt-rdmad puts its socket by default;
#   - `#include <virt-rdma/virt-rdma.h>` with `pkg-config --cflags --libs
#     virt-rdma` builds and runs, and the header's version macros are the
#     project's version.
set -uo pipefail

build=$1 src=$2
# A library built with -fsanitize=X needs programs built the same way.
sanitize=()
[ "${3:-none}" = none ] || sanitize=(-fsanitize="$3")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
d=$tmp/root
fail=0
bad() { echo "FAIL: $*"; fail=1; }

meson install -C "$build" --destdir "$d" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "FAIL: meson install"; exit 1; }

multiarch=$(cc -print-multiarch)
unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /usr/lib/systemd/system)
cat > "$tmp/expected" <<LIST
/etc/apparmor.d/abstractions/libvirt-qemu.d/virt-rdma
/etc/apparmor.d/abstractions/virt-rdma-libvirtd
/etc/apparmor.d/abstractions/virt-rdma-qemu
/etc/libvirt/hooks/qemu.d/virt-rdma
/etc/virt-rdma/virt-rdmad.conf
$unitdir/virt-rdmad.service
$unitdir/virt-rdmad.socket
/usr/bin/virt-rdma
/usr/include/virt-rdma/virt-rdma.h
/usr/lib/$multiarch/libvirtrdma.so
/usr/lib/$multiarch/libvirtrdma.so.0
/usr/lib/$multiarch/libvirtrdma.so.0.1.0
/usr/lib/$multiarch/pkgconfig/virt-rdma.pc
/usr/libexec/virt-rdma/virt-rdma-engine
/usr/sbin/virt-rdma-hook
/usr/sbin/virt-rdmad
/usr/share/bash-completion/completions/virt-rdma
/usr/share/doc/virt-rdma/from-qemu-rdma.rst
/usr/share/doc/virt-rdma/helper.rst
/usr/share/doc/virt-rdma/index.rst
/usr/share/doc/virt-rdma/install.rst
/usr/share/doc/virt-rdma/json.rst
/usr/share/doc/virt-rdma/metrics.rst
/usr/share/doc/virt-rdma/negotiation.rst
/usr/share/doc/virt-rdma/performance.rst
/usr/share/doc/virt-rdma/protocol.rst
/usr/share/doc/virt-rdma/reliability.rst
/usr/share/doc/virt-rdma/transparent.rst
/usr/share/doc/virt-rdma/xml.rst
/usr/share/locale/de/LC_MESSAGES/virt-rdma.mo
/usr/share/man/man1/virt-rdma.1
/usr/share/man/man3/vrmDomainGetJobStats.3
/usr/share/man/man3/vrmDomainMigrate3.3
/usr/share/man/man3/vrmDomainMigrateToURI3.3
/usr/share/man/man3/vrmLastError.3
/usr/share/man/man3/vrmLastErrorMessage.3
/usr/share/man/man5/virt-rdmad.conf.5
/usr/share/man/man8/virt-rdma-engine.8
/usr/share/man/man8/virt-rdma-hook.8
/usr/share/man/man8/virt-rdmad.8
/usr/share/virt-rdma/schemas/basictypes.rng
/usr/share/virt-rdma/schemas/control.rng
/usr/share/virt-rdma/schemas/migration.rng
/usr/share/virt-rdma/schemas/migrationcommon.rng
/usr/share/virt-rdma/schemas/peer.rng
/usr/share/virt-rdma/schemas/virt-rdma.schema.json
LIST
sort -o "$tmp/expected" "$tmp/expected"
(cd "$d" && find . \( -type f -o -type l \) | sed 's|^\.||' | sort) > "$tmp/installed"
if ! diff -u "$tmp/expected" "$tmp/installed" > "$tmp/diff"; then
    bad "installed files differ from the FHS layout (- expected, + installed):"
    sed -n 's/^\([-+]\/\)/    \1/p' "$tmp/diff"
fi

# The hook: a link to the installed program.
target=$(readlink "$d/etc/libvirt/hooks/qemu.d/virt-rdma")
[ "$target" = /usr/sbin/virt-rdma-hook ] && [ -x "$d$target" ] ||
    bad "the hook links to '$target', not the installed /usr/sbin/virt-rdma-hook"

# The service starts the installed daemon; the socket is the daemon's.
exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$d$unitdir/virt-rdmad.service")
[ "$exec_start" = /usr/sbin/virt-rdmad ] && [ -x "$d$exec_start" ] ||
    bad "virt-rdmad.service runs '$exec_start', not the installed /usr/sbin/virt-rdmad"
listen=$(sed -n 's/^ListenStream=//p' "$d$unitdir/virt-rdmad.socket")
# --check-config refuses names this machine lacks (the package creates
# the group virt-rdma and the user virt-rdma-engine): existing ones here;
# and a helpers' channel that would be off (no cluster key here): said off
printf '[access]\ngroup=%s\n[engine]\nuser=nobody\n[peers]\nauth=none\n' "$(id -gn)" > "$tmp/check.conf"
rundir=$("$build/driver/helper/virt-rdmad" --check-config --config "$tmp/check.conf" | sed -n 's/^run-dir=//p')
[ "$listen" = "$rundir/virt-rdmad.sock" ] ||
    bad "virt-rdmad.socket listens on '$listen', virt-rdmad's default socket is '$rundir/virt-rdmad.sock'"
grep -q "$listen" "$src/docs/man/virt-rdmad.rst" || bad "virt-rdmad(8) does not name the socket $listen"

# virt-rdmad --help: the compiled-in paths are installed ones, and the
# man page names each of them.
"$build/driver/helper/virt-rdmad" --help > "$tmp/help" || bad "virt-rdmad --help failed"
grep -oE '/(etc|usr|var|run)/[A-Za-z0-9_./-]*[A-Za-z0-9_]' "$tmp/help" | sort -u > "$tmp/paths"
[ -s "$tmp/paths" ] || bad "virt-rdmad --help names no path"
while read -r p; do
    grep -qF "$p" "$src/docs/man/virt-rdmad.rst" || bad "virt-rdmad --help names $p, virt-rdmad(8) does not"
    case "$p" in
        /usr/*) [ -e "$d$p" ] || bad "virt-rdmad --help names $p, which is not installed" ;;
    esac
done < "$tmp/paths"
grep -q '^/usr/libexec/virt-rdma/virt-rdma-engine$' "$tmp/paths" ||
    bad "virt-rdmad --help does not name the installed engine /usr/libexec/virt-rdma/virt-rdma-engine"
grep -q '^/etc/virt-rdma/virt-rdmad.conf$' "$tmp/paths" ||
    bad "virt-rdmad --help does not name /etc/virt-rdma/virt-rdmad.conf"

# A management application, as the README and the header say.
version=$(sed -n "s/^ *version: '\([0-9.]*\)',$/\1/p" "$src/meson.build" | head -1)
IFS=. read -r major minor micro <<< "$version"
cat > "$tmp/app.c" <<C
#include <stdio.h>
#include <virt-rdma/virt-rdma.h>

_Static_assert(VIRT_RDMA_VERSION_MAJOR == $major && VIRT_RDMA_VERSION_MINOR == $minor &&
               VIRT_RDMA_VERSION_MICRO == $micro, "version macros are not $version");
_Static_assert(VIRT_RDMA_CHECK_VERSION($major, $minor, $micro), "CHECK_VERSION of this version");
_Static_assert(!VIRT_RDMA_CHECK_VERSION($major, $minor, $((micro + 1))), "CHECK_VERSION of a later version");

int
main(void)
{
    int (*migrate)(virDomainPtr, const char *, virTypedParameterPtr,
                   unsigned int, unsigned int) = vrmDomainMigrateToURI3;
    const char *msg = vrmLastErrorMessage();

    printf("%d %s\n", migrate != NULL, msg ? "message" : "none");
    return 0;
}
C
pc="pkg-config --define-variable=prefix=$d/usr"
export PKG_CONFIG_PATH=$d/usr/lib/$multiarch/pkgconfig
flags=$($pc --cflags --libs virt-rdma) || bad "pkg-config virt-rdma failed"
if cc -Wall -Werror "${sanitize[@]}" -o "$tmp/app" "$tmp/app.c" $flags 2> "$tmp/cc.log"; then
    LD_LIBRARY_PATH=$d/usr/lib/$multiarch "$tmp/app" > "$tmp/app.out" || bad "the program built against libvirtrdma does not run"
else
    cat "$tmp/cc.log"; bad "a program including <virt-rdma/virt-rdma.h> does not build with pkg-config virt-rdma ($flags)"
fi

[ $fail = 0 ] && echo "ok: $(wc -l < "$tmp/installed") files at their FHS paths; units, help and man page agree; <virt-rdma/virt-rdma.h> builds with pkg-config ($flags)"
exit $fail
