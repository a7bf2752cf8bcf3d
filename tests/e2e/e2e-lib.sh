# e2e-lib.sh: shared by the e2e scenarios; sourced inside a sandbox VM.
# Hosts coordinate through flag files in $VRM_SANDBOX_SHARED; every wait
# has a deadline.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SHARED=$VRM_SANDBOX_SHARED
GUEST_SERIAL_DIR=/var/log/libvirt/qemu

# nap SECONDS: sleep without a fork. The sandbox's CPU is emulated: a
# `sleep` process five times a second is visible in every measurement.
nap_fifo=$(mktemp -u /tmp/nap.XXXXXX)
mkfifo "$nap_fifo" && exec {NAP_FD}<>"$nap_fifo"
rm -f "$nap_fifo"
nap() { read -r -t "$1" -u "$NAP_FD" _ 2>/dev/null; return 0; }

say() { echo "e2e[$VRM_SANDBOX_HOST] $(date +%T) $*"; }
fail() {
    say "FAIL: $*"
    touch "$SHARED/failed-$VRM_SANDBOX_HOST"
    exit 1
}

# flag NAME: tell the other host NAME happened.
flag() { touch "$SHARED/$1"; }

# wait_flag NAME SECONDS: wait for the other host's flag; fail on its
# failure or at the deadline.
wait_flag() {
    local name=$1 deadline=$((SECONDS + $2)) other
    [ "$VRM_SANDBOX_HOST" = a ] && other=b || other=a
    while [ ! -e "$SHARED/$name" ]; do
        [ -e "$SHARED/failed-$other" ] && fail "host $other failed while this host waited for '$name'"
        [ $SECONDS -ge $deadline ] && fail "no '$name' from host $other within $2 s"
        nap 0.2
    done
}

# wait_serial DOMAIN REGEX SECONDS: wait for the guest to print REGEX.
wait_serial() {
    local log=$GUEST_SERIAL_DIR/$1.serial deadline=$((SECONDS + $3))
    until grep -qE "$2" "$log" 2>/dev/null; do
        if grep -q "FAIL" "$log" 2>/dev/null; then
            grep "vrm-guest" "$log" | tail -3
            fail "the guest reports corrupted memory"
        fi
        [ $SECONDS -ge $deadline ] && { tail -3 "$log" 2>/dev/null; fail "guest $1 did not print '$2' within $3 s"; }
        nap 0.2
    done
}

start_libvirt() {
    bash "$E2E_DIR/libvirt-host.sh" || fail "libvirtd did not start"
    say "libvirtd up"
}

# define_guest NAME MIB CMDLINE [HARD_LIMIT_MIB]: a persistent domain running
# the e2e guest (QEMU's own RDMA migration needs a memory hard limit).
define_guest() {
    local memtune=
    [ -n "${4:-}" ] && memtune="<memtune><hard_limit unit='MiB'>$4</hard_limit></memtune>"
    sed -e "s|@NAME@|$1|g" -e "s|@MEM@|$2|" -e "s|@KERNEL@|$VRM_GUEST_ELF|" \
        -e "s|@CMDLINE@|$3|" -e "s|@MEMTUNE@|$memtune|" "$E2E_DIR/guest.xml.in" > "/tmp/$1.xml"
    virsh -q define "/tmp/$1.xml" >/dev/null || fail "cannot define $1"
    virsh -q start "$1" >/dev/null || fail "cannot start $1"
    wait_serial "$1" "filled" 120
    say "guest $1 running, RAM filled"
}

# check_migrated_source NAME: gone from here (defined, shut off), with a
# completed job that moved memory.
check_migrated_source() {
    local state info
    state=$(virsh domstate "$1" 2>&1)
    [ "$state" = "shut off" ] || fail "after migration $1 is '$state' on the source, not 'shut off'"
    info=$(virsh domjobinfo --completed --keep-completed "$1") || fail "no completed job for $1 on the source"
    echo "$info"
    grep -q "Memory bandwidth" <<<"$info" || fail "the completed job shows no memory bandwidth"
}

# check_migrated_destination NAME: running here, and the guest verifies
# its whole RAM after the migration.
check_migrated_destination() {
    local state
    state=$(virsh domstate "$1" 2>&1)
    [ "$state" = running ] || fail "after migration $1 is '$state' on the destination"
    wait_serial "$1" "verify [0-9]+ ok" 180
    say "guest $1 runs on the destination and its memory verifies: $(grep 'verify' "$GUEST_SERIAL_DIR/$1.serial" | tail -1)"
}

VRM_NS=http://virt-rdma.org/xmlns/migration/1.0

# start_virt_rdma [--no-helper]: this host's virt-rdmad (unless told not
# to) and the libvirt hook, before libvirtd starts (libvirt reads its hooks
# at start-up).
start_virt_rdma() {
    mkdir -p /etc/virt-rdma /etc/libvirt/hooks/qemu.d /run/virt-rdma
    cat > /etc/virt-rdma/virt-rdmad.conf <<CONF
[rdma]
device=$VRM_RDMA_DEVICE
address=$VRM_SELF_ADDR
CONF
    ln -sf "$VRM_BUILD_DIR/tools/hook/virt-rdma-hook" /etc/libvirt/hooks/qemu.d/virt-rdma
    if [ "${1:-}" != --no-helper ]; then
        "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --config /etc/virt-rdma/virt-rdmad.conf \
            --engine "$VRM_BUILD_DIR/driver/virt-rdma-engine" ${VRM_HELPER_LOG:---verbose} \
            > /tmp/virt-rdmad.log 2>&1 &
        echo $! > /tmp/virt-rdmad.pid
        local deadline=$((SECONDS + 30))
        until [ -S /run/virt-rdma/virt-rdmad.sock ]; do
            [ $SECONDS -ge $deadline ] && { cat /tmp/virt-rdmad.log; fail "virt-rdmad did not open its socket within 30 s"; }
            nap 0.1
        done
        say "virt-rdmad up"
    fi
}

# check_no_leftovers: no engine process and no job socket left behind.
check_no_leftovers() {
    local deadline=$((SECONDS + 15))
    # Engines by their argv[0] (virt-rdmad's own command line names the
    # engine too).
    while pgrep -f '^[^ ]*/virt-rdma-engine( |$)' >/dev/null; do
        [ $SECONDS -ge $deadline ] && { pgrep -af '^[^ ]*/virt-rdma-engine( |$)'; fail "an engine is still running"; }
        nap 0.2
    done
    while ls /run/virt-rdma/job-* >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            ls -l /run/virt-rdma/
            fail "a job socket was left behind in /run/virt-rdma"
        fi
        nap 0.2
    done
    say "no engine or job socket left behind"
}

# virsh_scenario DESCRIPTION HARD_LIMIT_MIB VIRSH_MIGRATE_ARGS...: host a
# starts the guest and migrates it to b with plain `virsh migrate`; b
# checks that it runs and that its memory verifies.
virsh_scenario() {
    local what=$1 limit=$2
    shift 2
    start_libvirt
    if [ "$VRM_SANDBOX_HOST" = a ]; then
        define_guest g1 128 "dirty_kb=2048" "$limit"
        wait_flag libvirt-b 120
        say "migrating $what"
        virsh migrate "$@" g1 "qemu+tcp://$VRM_PEER_ADDR/system" || fail "virsh migrate ($what) failed"
        check_migrated_source g1
        flag migrated
        wait_flag verified-b 240
    else
        flag libvirt-b
        wait_flag migrated 400
        check_migrated_destination g1
        flag verified-b
    fi
    say "done"
}
