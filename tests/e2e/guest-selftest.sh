#!/bin/bash
# guest-selftest.sh GUEST.ELF: the e2e guest's verifier passes on intact
# memory and catches one flipped bit. Runs the guest under QEMU TCG on this
# machine (no sandbox, no network).
set -u
elf=$1
fails=0
run() {
    local log
    log=$(mktemp)
    timeout 60 qemu-system-x86_64 -machine pc -accel tcg -m 64 -nographic -no-reboot \
        -nic none -monitor none -display none -serial "file:$log" \
        -kernel "$elf" -append "$1" &
    local pid=$!
    for _ in $(seq 300); do
        grep -qE "$2" "$log" && break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    grep "vrm-guest" "$log" | head -6
    grep -qE "$2" "$log"; local rc=$?
    rm -f "$log"
    return $rc
}
if run "dirty_kb=512" "verify 3 ok"; then echo "ok - intact memory verifies"; else echo "not ok - intact memory verifies"; fails=1; fi
if run "dirty_kb=512 corrupt_page=2000" "page 0x000007d0 word0 0x000007d0 word1 0x564d5247 guest gen [0-9]+: 2..511 xor 0x00000000, 512..512 xor 0x00000010, 513..1023 xor 0x00000000"; then
    echo "ok - a flipped bit is caught"
else
    echo "not ok - a flipped bit is caught"; fails=1
fi
echo "1..2"
exit $fails
