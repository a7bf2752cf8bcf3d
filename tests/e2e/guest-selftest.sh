#!/bin/bash
# guest-selftest.sh GUEST.ELF: the e2e guest's verifier passes on intact
# memory and catches one flipped bit; its disk writes (disk_sectors=N) are
# right on the image and its disk verifier catches a torn sector. Runs the
# guest under QEMU TCG on this machine (no sandbox, no network).
set -u
elf=$1
fails=0
lines=
# run SECONDS CMDLINE PATTERN [QEMU ARGS...]: boot the guest until its
# serial log matches PATTERN, for SECONDS at most (disk I/O is slow under
# TCG: its cases get longer); the guest's lines are left in $lines
run() {
    local log limit=$(($1 * 10)) cmdline=$2 pattern=$3
    shift 3
    log=$(mktemp)
    timeout $((limit / 10 + 30)) qemu-system-x86_64 -machine pc -accel tcg -m 64 \
        -nographic -no-reboot -nic none -monitor none -display none -serial "file:$log" \
        -kernel "$elf" -append "$cmdline" "$@" &
    local pid=$!
    for _ in $(seq $limit); do
        grep -qE "$pattern" "$log" && break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    lines=$(grep "vrm-guest" "$log" | tr -d '\r')
    # the first lines, and the last two (a failure comes last)
    if [ "$(echo "$lines" | wc -l)" -gt 8 ]; then
        echo "$lines" | head -6; echo "..."; echo "$lines" | tail -2
    elif [ -n "$lines" ]; then
        echo "$lines"
    fi
    grep -qE "$pattern" "$log"; local rc=$?
    rm -f "$log"
    return $rc
}
# check_image IMG SECTORS: what the guest wrote, read from outside once
# QEMU is gone: sector s of [1, 1+SECTORS) is {s, g, H(s)^g x 126} for a
# generation g >= 1 (vrmguest.c's pageHash), all other sectors are zeros
check_image() {
    python3 - "$1" "$2" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = int(sys.argv[2])
M = 0xffffffff
def page_hash(p):
    x = (p * 0x9e3779b1 + 0x7f4a7c15) & M
    x ^= x >> 15
    x = (x * 0x2c1b3c6d) & M
    x ^= x >> 12
    return x | 0x01000000
gens = []
for s in range(len(data) // 512):
    w = struct.unpack_from("<128I", data, s * 512)
    if not 1 <= s <= n:
        if any(w):
            sys.exit("sector %d is outside the guest's region and not zero" % s)
        continue
    if w[0] != s or w[1] < 1:
        sys.exit("sector %d: word0 0x%08x word1 0x%08x" % (s, w[0], w[1]))
    bad = [i for i in range(2, 128) if w[i] != page_hash(s) ^ w[1]]
    if bad:
        sys.exit("sector %d gen %d: word %d is 0x%08x, expected 0x%08x"
                 % (s, w[1], bad[0], w[bad[0]], page_hash(s) ^ w[1]))
    gens.append(w[1])
print("image: sectors 1..%d whole, at generations %d..%d; the rest zeros"
      % (n, min(gens), max(gens)))
PY
}

if run 30 "dirty_kb=512" "verify 3 ok"; then echo "ok - intact memory verifies"; else echo "not ok - intact memory verifies"; fails=1; fi
if run 30 "dirty_kb=512 corrupt_page=2000" "page 0x000007d0 word0 0x000007d0 word1 0x564d5247 guest gen [0-9]+: 2..511 xor 0x00000000, 512..512 xor 0x00000010, 513..1023 xor 0x00000000"; then
    echo "ok - a flipped bit is caught"
else
    echo "not ok - a flipped bit is caught"; fails=1
fi

img=$(mktemp)
truncate -s 2M "$img"
disk=(-drive "file=$img,format=raw,if=ide,index=0,media=disk")
if run 45 "dirty_kb=512 disk_sectors=1024" "disk verify 3 sectors 1024 ok" "${disk[@]}" &&
   check_image "$img" 1024; then
    echo "ok - disk writes verify"
else
    echo "not ok - disk writes verify"; fails=1
fi
# the second disk verify catches a torn sector 700 (its words 64..127 at
# another generation): the FAIL line, then the sector's runs (waited for
# whole: the serial log is written a character at a time)
rm -f "$img"; truncate -s 2M "$img"
hex="0x[0-9a-f]{8}"
if run 45 "dirty_kb=512 disk_sectors=1024 corrupt_sector=700" "sector 700 word0 .*, 64..127 gen $hex" "${disk[@]}" &&
   echo "$lines" | grep -qE "disk verify 2 FAIL sector 700 word 64 value $hex expected $hex$" &&
   echo "$lines" | grep -qE "sector 700 word0 0x000002bc word1 ($hex) table gen [0-9]+: 2..63 gen \1, 64..127 gen $hex$"; then
    echo "ok - a corrupted disk sector is caught"
else
    echo "not ok - a corrupted disk sector is caught"; fails=1
fi
rm -f "$img"
echo "1..4"
exit $fails
