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
    # the helper's side of it, when it ran here
    [ -s /tmp/virt-rdmad.log ] && tail -n 40 /tmp/virt-rdmad.log | sed 's/^/  virt-rdmad: /'
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

# wait_data_moved NAME: the running migration of NAME has moved a MiB
wait_data_moved() {
    local deadline=$((SECONDS + 120))
    until virsh domjobinfo "$1" 2>/dev/null | grep -qE "^Data processed: +[0-9.]+ MiB"; do
        [ $SECONDS -ge $deadline ] && { echo "the migration of $1 moved no data in 120 s"; return 1; }
        nap 0.2
    done
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

# The helpers' users and group, as the package creates them (the VM's /etc
# is a tmpfs overlay).
add_system_users() {
    getent group virt-rdma >/dev/null || echo "virt-rdma:x:64060:" >> /etc/group
    getent group virt-rdma-engine >/dev/null || echo "virt-rdma-engine:x:64061:" >> /etc/group
    getent passwd virt-rdma-engine >/dev/null ||
        echo "virt-rdma-engine:x:64061:64061:virt-rdma engines:/nonexistent:/usr/sbin/nologin" >> /etc/passwd
}

# cluster_key [NAME]: this host's /etc/virt-rdma/cluster.key: the shared
# run's key (made once, by host a), or with NAME another one of its own.
cluster_key() {
    local key=$SHARED/cluster.key
    if [ -n "${1:-}" ]; then
        key=$SHARED/$1.key
        [ -e "$key" ] || "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --generate-key "$key" || fail "cannot make $key"
    elif [ "$VRM_SANDBOX_HOST" = a ]; then
        "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --generate-key "$SHARED/.cluster.key" ||
            fail "cannot make the cluster key"
        mv "$SHARED/.cluster.key" "$key"
    else
        local deadline=$((SECONDS + 60))
        until [ -e "$key" ]; do
            [ $SECONDS -ge $deadline ] && fail "no cluster key from host a"
            nap 0.2
        done
    fi
    install -m 0600 "$key" /etc/virt-rdma/cluster.key
}

# helper_conf_dir: /etc/virt-rdma, also where this build looks for its
# configuration (the hook reads it there: libvirt passes hooks no
# environment), e.g. /usr/local/etc/virt-rdma for the default prefix
helper_conf_dir() {
    local conf dir
    conf=$(LC_ALL=C "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --help |
           sed -n 's/.*configuration file (default \(.*\))$/\1/p')
    [ -n "$conf" ] || fail "virt-rdmad --help names no default configuration file"
    mkdir -p /etc/virt-rdma
    dir=$(dirname "$conf")
    if [ "$dir" != /etc/virt-rdma ]; then
        rm -rf "$dir"
        mkdir -p "$(dirname "$dir")"
        ln -s /etc/virt-rdma "$dir"
    fi
}

# write_helper_conf [EXTRA...]: /etc/virt-rdma/virt-rdmad.conf for this
# host; EXTRA lines are appended (groups of their own)
write_helper_conf() {
    cat > /etc/virt-rdma/virt-rdmad.conf <<CONF
[rdma]
device=$VRM_RDMA_DEVICE
address=$VRM_SELF_ADDR

[access]
group=virt-rdma

[paths]
state-dir=/var/lib/virt-rdma

[peers]
auth=psk
key-file=/etc/virt-rdma/cluster.key
host=sandbox-$VRM_SANDBOX_HOST
address=$VRM_SELF_ADDR
CONF
    local line
    for line in "$@"; do echo "$line" >> /etc/virt-rdma/virt-rdmad.conf; done
}

# run_helper: start this host's virt-rdmad (its log: /tmp/virt-rdmad.log)
run_helper() {
    rm -f /run/virt-rdma/virt-rdmad.sock
    VRM_HELPER_TEST_TOKEN_DIR=$SHARED/tokens-$VRM_SANDBOX_HOST \
        "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --config /etc/virt-rdma/virt-rdmad.conf \
        --engine "$VRM_BUILD_DIR/driver/virt-rdma-engine" ${VRM_HELPER_LOG:---verbose} \
        >> /tmp/virt-rdmad.log 2>&1 &
    echo $! > /tmp/virt-rdmad.pid
    local deadline=$((SECONDS + 30))
    until [ -S /run/virt-rdma/virt-rdmad.sock ]; do
        [ $SECONDS -ge $deadline ] && { cat /tmp/virt-rdmad.log; fail "virt-rdmad did not open its socket within 30 s"; }
        nap 0.1
    done
    say "virt-rdmad up"
}

stop_helper() {
    local pid
    pid=$(cat /tmp/virt-rdmad.pid 2>/dev/null) || return 0
    kill "$pid" 2>/dev/null
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && fail "virt-rdmad did not stop"
        nap 0.1
    done
    say "virt-rdmad stopped"
}

# start_virt_rdma [--no-helper]: this host's virt-rdmad (unless told not
# to) and the libvirt hook, before libvirtd starts (libvirt reads its hooks
# at start-up); the helpers share one cluster key.
start_virt_rdma() {
    mkdir -p /etc/virt-rdma /etc/libvirt/hooks/qemu.d /run/virt-rdma
    helper_conf_dir
    mkdir -p -m 0700 "$SHARED/tokens-$VRM_SANDBOX_HOST"
    add_system_users
    cluster_key
    write_helper_conf
    ln -sf "$VRM_BUILD_DIR/tools/hook/virt-rdma-hook" /etc/libvirt/hooks/qemu.d/virt-rdma
    [ "${1:-}" = --no-helper ] || run_helper
}

# enable_rdma DOMAIN: the domain's <rdma:migration> metadata (live and
# persistent), then wait for the helper's locator in the live one
enable_rdma() {
    virsh -q metadata "$1" --uri "$VRM_NS" --key rdma --set "${2:-<migration/>}" \
        --live --config || fail "cannot set the metadata of $1"
    wait_locator "$1" "sandbox-$VRM_SANDBOX_HOST"
}

# wait_locator DOMAIN HOST: the live metadata names HOST's helper
wait_locator() {
    local deadline=$((SECONDS + 30))
    until virsh -q metadata "$1" --uri "$VRM_NS" --live 2>/dev/null | grep -q "host=\"$2\""; do
        [ $SECONDS -ge $deadline ] && { virsh metadata "$1" --uri "$VRM_NS" --live; fail "no locator of $2 in $1's metadata"; }
        nap 0.2
    done
    say "$1's live metadata: $(virsh -q metadata "$1" --uri "$VRM_NS" --live | tr -d '\n')"
}

# Host a drives, host b serves: `remote CMD` runs CMD (a shell snippet,
# with this library's functions) on host b and prints its output; its
# status is CMD's. `serve_remote` is host b's loop, until `remote_stop`.
# The request counter lives in a file: `x=$(remote ...)` runs remote in a
# subshell, whose variables do not come back.
remote() {
    local n deadline=$((SECONDS + ${REMOTE_TIMEOUT:-300}))
    n=$(cat "$SHARED/.remote-n" 2>/dev/null || echo 0)
    echo $((n + 1)) > "$SHARED/.remote-n"
    printf '%s\n' "$*" > "$SHARED/.req-$n"
    mv "$SHARED/.req-$n" "$SHARED/req-$n"
    until [ -e "$SHARED/rc-$n" ]; do
        [ -e "$SHARED/failed-b" ] && fail "host b failed"
        [ $SECONDS -ge $deadline ] && fail "host b did not run '$*' within ${REMOTE_TIMEOUT:-300} s"
        nap 0.1
    done
    sed 's/^/  [b] /' "$SHARED/out-$n"
    return "$(cat "$SHARED/rc-$n")"
}
remote_stop() { touch "$SHARED/remote-stop"; }
serve_remote() {
    local n=0
    while :; do
        until [ -e "$SHARED/req-$n" ]; do
            [ -e "$SHARED/remote-stop" ] && return 0
            [ -e "$SHARED/failed-a" ] && fail "host a failed"
            nap 0.05
        done
        ( eval "$(cat "$SHARED/req-$n")" ) > "$SHARED/out-$n" 2>&1
        echo $? > "$SHARED/.rc-$n"
        mv "$SHARED/.rc-$n" "$SHARED/rc-$n"
        n=$((n + 1))
    done
}

# verify_count DOMAIN: how many "verify ... ok" lines the guest printed here
verify_count() {
    # grep -c prints 0 and fails when nothing matches: one number either way
    local n
    n=$(grep -c "verify [0-9]* ok" "$GUEST_SERIAL_DIR/$1.serial" 2>/dev/null)
    echo "${n:-0}"
}

# rdma_vs_memory WHAT [SLACK]: the RDMA bytes of the last job >= libvirt's
# memory processed - SLACK bytes (default 0), from `virt-rdma jobinfo
# --completed` on the source
rdma_vs_memory() {
    /usr/bin/python3 - "$1" "${2:-0}" <<'PY' || fail "RDMA bytes sent are fewer than the memory libvirt moved"
import re, sys
text = open("/tmp/jobinfo.txt").read()
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(label):
    m = re.search(r"^%s\s+([\d.]+) (\w+)" % re.escape(label), text, re.M)
    if not m:
        sys.exit("no '%s' line" % label)
    return float(m.group(1)) * units[m.group(2)]
mem, rdma = size("Memory processed:"), size("RDMA bytes sent:")
print("%s: memory processed %.0f bytes, RDMA bytes sent %.0f bytes" % (sys.argv[1], mem, rdma))
sys.exit(0 if rdma >= mem - int(sys.argv[2]) else 1)
PY
}

# check_arrived DOMAIN BEFORE: running here, and the guest verified its
# whole RAM again after the migration (more verify lines than BEFORE)
check_arrived() {
    local state deadline=$((SECONDS + 180))
    state=$(virsh domstate "$1" 2>&1)
    [ "$state" = running ] || fail "after migration $1 is '$state' on this host"
    until [ "$(verify_count "$1")" -gt "$2" ]; do
        grep -q "FAIL" "$GUEST_SERIAL_DIR/$1.serial" 2>/dev/null && { grep vrm-guest "$GUEST_SERIAL_DIR/$1.serial" | tail -3; fail "the guest reports corrupted memory"; }
        [ $SECONDS -ge $deadline ] && fail "guest $1 did not verify its memory within 180 s"
        nap 0.2
    done
    say "guest $1 runs here and its memory verifies: $(grep 'verify' "$GUEST_SERIAL_DIR/$1.serial" | tail -1)"
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
    while [ -n "$(find /run/virt-rdma/qemu /run/virt-rdma/engine -mindepth 1 2>/dev/null)" ]; do
        if [ $SECONDS -ge $deadline ]; then
            ls -lR /run/virt-rdma/
            fail "a per-domain directory or a stats socket was left behind in /run/virt-rdma"
        fi
        nap 0.2
    done
    if ls /var/lib/virt-rdma/job-*.run >/dev/null 2>&1; then
        ls -l /var/lib/virt-rdma/
        fail "a job record of a live engine was left behind"
    fi
    local open
    open=$(grep -l 'state="\(negotiating\|connected\|transferring\)"' /var/lib/virt-rdma/job-*.xml 2>/dev/null)
    [ -z "$open" ] || fail "job records in a non-final state: $open"
    say "no engine, per-domain directory, stats socket or open record left behind"
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
