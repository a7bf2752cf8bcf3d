#!/bin/bash
# matrix.sh: the whole compatibility matrix in one command (ninja -C build
# compat-matrix): every entry on Debian 12 and Debian 13 sandbox hosts,
# then a table of the results with their seconds. CI runs a subset (the
# compat suite: Debian 13; the e2e suite covers Debian 12).
#
# It takes the sandbox lock (/tmp/vrm-sandbox.lock) itself for the whole
# run: do not wrap it in flock. VRM_COMPAT_DISTROS ("12 13") and
# VRM_COMPAT_ENTRIES ("unit migrate negotiation native tcp") narrow it.
set -u -o pipefail
src=${VRM_SOURCE_DIR:?}
build=${VRM_BUILD_DIR:?}
out=$build/compat-matrix.txt
exec {lock}> /tmp/vrm-sandbox.lock
echo "compat-matrix: waiting for the sandbox lock" >&2
flock "$lock"

results=()
entry() {  # DISTRO NAME ARGS...
    local distro=$1 name=$2 start rc log
    shift 2
    log=$build/compat-$distro-$name.log
    echo "==== Debian $distro: $name ====" >&2
    start=$SECONDS
    bash "$src/tests/compat/compat-test.sh" "$distro" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    results+=("$(printf '%-10s %-46s %-5s %5ss' "Debian $distro" "$name" \
                 "$([ "$rc" = 0 ] && echo pass || echo FAIL)" $((SECONDS - start)))")
}

for d in ${VRM_COMPAT_DISTROS:-12 13}; do
    [ "$d" = 13 ] && entry 13 root root
    for e in ${VRM_COMPAT_ENTRIES:-unit migrate negotiation native tcp}; do
        case "$e" in
            unit) entry "$d" unit unit ;;
            migrate) entry "$d" one-channel+parallel-4+pin-all migrate one-channel parallel pin-all ;;
            negotiation) entry "$d" negotiation-migrations negotiation migrations ;;
            native) entry "$d" native-rdma-reference native ;;
            tcp) entry "$d" tcp-baseline tcp ;;
            *) echo "matrix.sh: unknown entry '$e'" >&2; exit 2 ;;
        esac
    done
done

{
    echo
    echo "compatibility matrix ($(date -u +%F))"
    printf '%s\n' "${results[@]}"
} | tee "$out"
! grep -q ' FAIL ' "$out"
