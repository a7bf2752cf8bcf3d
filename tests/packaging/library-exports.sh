#!/bin/bash
# library-exports.sh LIBRARY HEADER VERSION_SCRIPT SYMBOLS_FILE: the shared
# library exports exactly the public API, with symbol versions.
#
# The functions declared in the public header, the global names of the
# linker version script, the symbols of debian/libvirtrdma0.symbols and
# what `nm -D --defined-only` lists must be one and the same set, every
# exported function must carry a VIRT_RDMA_* version, and the soname must
# be libvirtrdma.so.0. The check is first run on doctored nm output (an
# internal symbol leaked; an unversioned symbol), where it must fail.
set -uo pipefail

lib=$1 header=$2 script=$3 symbols=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The header without comments, then every identifier followed by '('.
cc -fpreprocessed -dD -E -P "$header" 2>/dev/null |
    grep -oE '\bvrm[A-Za-z0-9_]*[[:space:]]*\(' | tr -d '( \t' | sort -u > "$tmp/header"
# Global names of the version script: between "global:" and "local:".
cc -fpreprocessed -dD -E -P -x c "$script" 2>/dev/null | awk '/global:/{g=1; next} /local:/{g=0} g' |
    tr -d ' \t;' | grep -v '^$' | sort -u > "$tmp/script"
# debian/*.symbols: " name@VERSION minver", without the version node itself.
grep -E '^ [A-Za-z_]' "$symbols" | awk '{print $1}' | sed 's/@.*//' |
    grep -v '^VIRT_RDMA_' | sort -u > "$tmp/symbols"

# check NM_OUTPUT: 0 when the exports are right, 1 with the reasons.
check() {
    local nm=$1 bad=0
    awk '$2 == "T" || $2 == "W" || $2 == "D" || $2 == "B" || $2 == "R" {print $3}' "$nm" > "$tmp/exported"
    if grep -v '@@\?VIRT_RDMA_[0-9.]*$' "$tmp/exported" > "$tmp/unversioned"; then
        echo "exported without a VIRT_RDMA_* symbol version:"; sed 's/^/    /' "$tmp/unversioned"
        bad=1
    fi
    sed 's/@.*//' "$tmp/exported" | sort -u > "$tmp/names"
    if ! diff -u "$tmp/header" "$tmp/names" > "$tmp/diff"; then
        echo "the exports differ from the functions of $(basename "$header") (- header, + library):"
        sed -n 's/^\([-+][^-+]\)/    \1/p' "$tmp/diff"
        bad=1
    fi
    return $bad
}

fail=0
[ -s "$tmp/header" ] || { echo "no function found in $header"; exit 1; }
if ! diff -u "$tmp/header" "$tmp/script"; then
    echo "FAIL: the version script's global names differ from the header's functions"; fail=1
fi
if ! diff -u "$tmp/header" "$tmp/symbols"; then
    echo "FAIL: $(basename "$symbols") differs from the header's functions"; fail=1
fi

nm -D --defined-only "$lib" > "$tmp/nm" || { echo "nm failed on $lib"; exit 1; }

# The check must be able to fail.
cp "$tmp/nm" "$tmp/nm-leak"
echo "0000000000001234 T vrmXMLParseMemory" >> "$tmp/nm-leak"
if check "$tmp/nm-leak" > /dev/null; then echo "FAIL: a leaked internal symbol went unnoticed"; fail=1; fi
sed 's/@@VIRT_RDMA_[0-9.]*$//' "$tmp/nm" > "$tmp/nm-unversioned"
if check "$tmp/nm-unversioned" > /dev/null; then echo "FAIL: unversioned exports went unnoticed"; fail=1; fi

echo "nm -D --defined-only $(basename "$lib"):"
sed 's/^/    /' "$tmp/nm"
if ! check "$tmp/nm"; then echo "FAIL: $(basename "$lib") exports more or less than its public API"; fail=1; fi

soname=$(objdump -p "$lib" | awk '$1 == "SONAME" {print $2}')
[ "$soname" = libvirtrdma.so.0 ] || { echo "FAIL: soname is '$soname', not libvirtrdma.so.0"; fail=1; }

[ $fail = 0 ] && echo "ok: exactly the $(wc -l < "$tmp/header") public functions, versioned; soname $soname"
exit $fail
