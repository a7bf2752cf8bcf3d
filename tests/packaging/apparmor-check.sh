#!/bin/bash
# apparmor-check.sh ABSTRACTION...: each AppArmor abstraction that virt-rdma
# installs compiles (apparmor_parser -QT: parse and compile, load nothing)
# inside a profile that includes it as Debian's profiles do, beside
# abstractions/base. A snippet with a syntax error must fail the same way.
# The snippets are also found as abstractions/NAME (an -I directory), so
# that the libvirt-qemu.d drop-in's include of abstractions/virt-rdma-qemu
# resolves to this tree's file.
set -uo pipefail

parser=$(command -v apparmor_parser || echo /sbin/apparmor_parser)
[ -x "$parser" ] || { echo "apparmor_parser not found: apt-get install apparmor"; exit 1; }
[ -e /etc/apparmor.d/abstractions/base ] || { echo "/etc/apparmor.d/abstractions/base is missing: apt-get install apparmor"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# compile SNIPPET: 0 when a profile including SNIPPET compiles.
compile() {
    cat > "$tmp/profile" <<PROFILE
#include <tunables/global>
profile virt-rdma-check flags=(attach_disconnected) {
  #include <abstractions/base>
  #include "$1"
}
PROFILE
    "$parser" -QT -K -I "$tmp/inc" "$tmp/profile" > "$tmp/out" 2>&1
}

mkdir -p "$tmp/inc/abstractions"
for f in "$@"; do
    cp "$f" "$tmp/inc/abstractions/$(basename "$f")"
done

fail=0
printf '  /run/virt-rdma/qemu/*/migrate.sock rw\n' > "$tmp/broken"   # no ','
if compile "$tmp/broken"; then
    echo "FAIL: a snippet with a syntax error compiled"; fail=1
fi
for f in "$@"; do
    f=$(realpath "$f")
    if compile "$f"; then
        echo "ok: $(basename "$f") compiles ($parser -QT)"
    else
        echo "FAIL: $(basename "$f") does not compile:"; sed 's/^/    /' "$tmp/out"; fail=1
    fi
done
exit $fail
