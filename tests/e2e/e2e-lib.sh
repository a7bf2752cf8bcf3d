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
# timed CMD...: run CMD and say how long it took; its status
timed() {
    local start=$SECONDS
    "$@"
    local rc=$?
    say "took $((SECONDS - start)) s: $*"
    return $rc
}
fail() {
    local kmsg crash gone= pid
    local crashes="segfault|traps:|general protection|out of memory|killed process"
    # what says most goes on the FAIL line itself: CI shows only an
    # excerpt of a failed test's output (CI-16 and stop 40's CI run saw a's
    # libvirtd gone mid fault row 14, and the excerpt did not say why).
    # libvirtd removes its pid file when it exits by itself.
    kmsg=$(dmesg 2>/dev/null)
    crash=$(grep -iE "$crashes" <<<"$kmsg" | tail -n 1)
    pid=$(cat /run/libvirtd.pid 2>/dev/null) && ! kill -0 "$pid" 2>/dev/null &&
        gone=" [libvirtd (pid $pid) died]"
    say "FAIL: $*$gone${crash:+ [kernel: $crash]}"
    # the helper's side of it, when it ran here
    [ -s /tmp/virt-rdmad.log ] && tail -n 40 /tmp/virt-rdmad.log | sed 's/^/  virt-rdmad: /'
    # engines still alive and jobs not ended: what a hang leaves (stop 55's
    # CI saw two jobs stay "transferring" after virsh had returned)
    pgrep -a -f '^[^ ]*/virt-rdma-engine( |$)' 2>/dev/null | cut -c1-200 | sed 's/^/  engine alive: /'
    command -v vrmhelperctl > /dev/null &&
        timeout 5 vrmhelperctl list 2>/dev/null | grep -o '<job [^>]*>' |
        grep -vE 'state="(completed|failed|cancelled|over-tcp|unknown)"' | head -n 8 | sed 's/^/  job not ended: /'
    # libvirtd's last errors, once it has a log
    grep -E " (error|warning) : " /var/log/libvirt/libvirtd.log 2>/dev/null | tail -n 5 | sed 's/^/  libvirtd: /'
    # the sandbox's wire (a stalled queue or an rxe complaint) and crashes
    grep -iE "watchdog|lockup|rcu.*stall|hung_task|timed out|rdma_rxe|rxe0|virtio_net|$crashes" <<<"$kmsg" |
        tail -n 8 | sed 's/^/  kernel: /'
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

# use_cgroups: cgroup v2 on /sys/fs/cgroup, as on a host that systemd
# booted (the sandbox's init mounts none): libvirtd then runs in a cgroup
# of its own (libvirt-host.sh) and gives each QEMU one, which the
# transparent mode's rules match (docs/transparent.rst)
use_cgroups() {
    [ -f /sys/fs/cgroup/cgroup.controllers ] ||
        mount -t cgroup2 none /sys/fs/cgroup || fail "cannot mount cgroup2 on /sys/fs/cgroup"
}

start_libvirt() {
    qemu_caps_restore lab
    bash "$E2E_DIR/libvirt-host.sh" || fail "libvirtd did not start"
    say "libvirtd up"
    qemu_caps_save lab
}

# qemu_caps_restore FLAVOUR / qemu_caps_save FLAVOUR: libvirt's cache of
# QEMU's capabilities, kept between sandbox boots in the sandbox's cache
# (vrm-sandbox --help) as a host keeps /var/cache/libvirt across reboots.
# Without it every boot probes both QEMU binaries again (15-20 s of
# emulated CPU on each host). libvirt still checks each file against the
# QEMU binary and itself and probes again when it is stale. FLAVOUR keeps
# the daemon setups apart (QEMU as root here, as libvirt-qemu on a stock
# host), the release keeps Debian 12's and 13's apart.
qemu_caps_dir() {
    echo "$SHARED/cache/libvirt-qemu-capabilities-$(. /etc/os-release; echo "debian$VERSION_ID")-$1"
}
qemu_caps_restore() {
    local from
    from=$(qemu_caps_dir "$1")
    ls "$from"/*.xml > /dev/null 2>&1 || return 0
    mkdir -p /var/cache/libvirt/qemu/capabilities
    cp "$from"/*.xml /var/cache/libvirt/qemu/capabilities/ &&
        chmod 0600 /var/cache/libvirt/qemu/capabilities/*.xml
}
qemu_caps_save() {
    local to f
    to=$(qemu_caps_dir "$1")
    mkdir -p "$to" || return 0
    for f in /var/cache/libvirt/qemu/capabilities/*.xml; do
        [ -f "$f" ] || continue
        cmp -s "$f" "$to/${f##*/}" && continue
        # both hosts may write it: whole files only
        cp "$f" "$to/.${f##*/}.$VRM_SANDBOX_HOST" && mv "$to/.${f##*/}.$VRM_SANDBOX_HOST" "$to/${f##*/}"
    done
}

# define_guest NAME MIB CMDLINE [HARD_LIMIT_MIB]: a persistent domain running
# the e2e guest (QEMU's own RDMA migration needs a memory hard limit).
define_guest() {
    start_guest "$@"
    wait_filled "$1"
}

# start_guest NAME MIB CMDLINE [HARD_LIMIT_MIB [METADATA]]: define_guest
# without the wait for its RAM to be filled (several guests start at once)
start_guest() {
    local memtune=
    [ -n "${4:-}" ] && memtune="<memtune><hard_limit unit='MiB'>$4</hard_limit></memtune>"
    sed -e "s|@NAME@|$1|g" -e "s|@MEM@|$2|" -e "s|@KERNEL@|$VRM_GUEST_ELF|" \
        -e "s|@CMDLINE@|$3|" -e "s|@MEMTUNE@|$memtune|" -e "s|@METADATA@|${5:-}|" \
        "$E2E_DIR/guest.xml.in" > "/tmp/$1.xml"
    virsh -q define "/tmp/$1.xml" >/dev/null || fail "cannot define $1"
    virsh -q start "$1" >/dev/null || fail "cannot start $1"
}

# wait_filled NAME: the guest started by start_guest has filled its RAM
wait_filled() {
    wait_serial "$1" "filled" 120
    say "guest $1 running, RAM filled"
}

# wait_data_moved NAME [SECONDS]: the running migration of NAME has moved a
# MiB within SECONDS (120)
wait_data_moved() {
    local deadline=$((SECONDS + ${2:-120}))
    until virsh domjobinfo "$1" 2>/dev/null | grep -qE "^Data processed: +[0-9.]+ MiB"; do
        [ $SECONDS -ge $deadline ] && { echo "the migration of $1 moved no data in ${2:-120} s"; return 1; }
        nap 0.2
    done
}

# wait_postcopy NAME PID: libvirt says NAME is in post-copy (after `virsh
# migrate-postcopy`) while its migration, the process PID, runs. Polled
# every 50 ms and given up as soon as the migration ends: CI saw a
# migration end before a slower poll saw post-copy (a faster machine than
# the sandbox's usual one); the ended job's page requests then say
# whether it ever was in post-copy.
wait_postcopy() {
    local deadline=$((SECONDS + 60))
    until [ "$(virsh domstate --reason "$1")" = "paused (post-copy)" ]; do
        if ! kill -0 "$2" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            virsh domjobinfo --completed "$1" 2>/dev/null | grep -E "^(Time elapsed|Data processed|Postcopy requests):"
            echo "$1 is '$(virsh domstate --reason "$1")': the migration ended, or ran 60 s after the switch, without being seen in post-copy"
            return 1
        fi
        nap 0.05
    done
}

# hold_migration NAME: once the running migration of NAME moves data, cap
# it at 64 KiB/s through QEMU's monitor, so that it runs until `virsh
# migrate-setspeed NAME MIB` lifts the cap: libvirt's smallest cap, 1 MiB/s,
# lets a small guest's first pass end within a minute, and nothing after
# the first pass holds (the guest stops dirtying while it verifies its RAM,
# so QEMU finds nothing left to send and completes at any downtime limit).
# Tainting the domain ("custom-monitor") is fine in a test.
hold_migration() {
    # four starting at once under load took up to 140 s to move data
    wait_data_moved "$1" 300 || return 1
    virsh -q qemu-monitor-command "$1" \
        '{"execute":"migrate-set-parameters","arguments":{"max-bandwidth":65536}}' > /dev/null ||
        { echo "cannot cap the migration of $1 through QEMU's monitor"; return 1; }
}

# hold_migrations NAME...: hold_migration for each at once: held one after
# the other, the last one's first pass could end before its turn (CI saw
# the third of three complete at 1 MiB/s while the first two were capped)
hold_migrations() {
    local g pids=() rc=0 i=0
    for g in "$@"; do
        hold_migration "$g" > "/tmp/hold-$g.out" 2>&1 &
        pids+=($!)
    done
    for g in "$@"; do
        wait "${pids[$i]}" || { cat "/tmp/hold-$g.out"; echo "the migration of $g was not held"; rc=1; }
        i=$((i + 1))
    done
    return $rc
}

# lift_cap NAME PID: lift the bandwidth cap of NAME's running migration
# (the process PID) once it has done its work; a migration that ended
# meanwhile has no cap to lift
lift_cap() {
    virsh migrate-setspeed "$1" 1000 > /dev/null || ! kill -0 "$2" 2>/dev/null ||
        { echo "cannot lift the bandwidth cap of the migration of $1"; return 1; }
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

VRM_NS=http://virt-rdma.org/xmlns/migration/1.0

# The helpers' users and group, as the package creates them, and libvirt's
# group, as libvirt-daemon-system does (the helper's [access] libvirt-group;
# the VM's /etc is a tmpfs overlay).
add_system_users() {
    getent group virt-rdma >/dev/null || echo "virt-rdma:x:64060:" >> /etc/group
    getent group libvirt >/dev/null || echo "libvirt:x:64062:" >> /etc/group
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

# The scenarios check how the per-domain path refuses: under the default
# (tcp) the hook lets libvirt go on, and an explicit migration then fails
# at the destination QEMU's listen instead. refusal_steps checks the
# default itself (step 3b).
[migration]
fallback=refuse
CONF
    local line
    for line in "$@"; do echo "$line" >> /etc/virt-rdma/virt-rdmad.conf; done
}

# syslog_tap_start / syslog_tap_stop: what programs send to syslog(3) here
# (the sandbox runs no syslog daemon) goes to /tmp/syslog-tap.txt, one
# message a line
syslog_tap_start() {
    rm -f /dev/log /tmp/syslog-tap.txt
    python3 -c '
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/dev/log")
with open("/tmp/syslog-tap.txt", "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536).rstrip(b"\n") + b"\n")
' > /dev/null 2>&1 &
    echo $! > /tmp/syslog-tap.pid
    local deadline=$((SECONDS + 10))
    until [ -S /dev/log ]; do
        [ $SECONDS -ge $deadline ] && fail "the syslog tap did not bind /dev/log within 10 s"
        nap 0.1
    done
}
syslog_tap_stop() {
    kill "$(cat /tmp/syslog-tap.pid 2>/dev/null)" 2>/dev/null
    rm -f /dev/log /tmp/syslog-tap.pid
}

# helper_log_options: the log options of the helpers run_helper starts
# here: --verbose, or what `helper_log_debug` asked for the helpers started
# from then on (VRM_HELPER_LOG, exported before this host's helper starts,
# overrides both)
helper_log_options() { cat /tmp/vrm-helper-log 2>/dev/null || echo --verbose; }
helper_log_debug() { echo "--verbose --engine-debug" > /tmp/vrm-helper-log; }

# run_helper: start this host's virt-rdmad (its log: /tmp/virt-rdmad.log)
run_helper() {
    rm -f /run/virt-rdma/virt-rdmad.sock
    VRM_HELPER_TEST_TOKEN_DIR=$SHARED/tokens-$VRM_SANDBOX_HOST \
        "$VRM_BUILD_DIR/driver/helper/virt-rdmad" --config /etc/virt-rdma/virt-rdmad.conf \
        --engine "$VRM_BUILD_DIR/driver/virt-rdma-engine" ${VRM_HELPER_LOG:-$(helper_log_options)} \
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

# start_rdma_guest NAME MIB CMDLINE: start_guest, the domain defined
# RDMA-enabled (<rdma:migration/> in its metadata): the helper puts its
# locator in as the domain starts (enable_rdma on a running guest took 5 to
# 10 s a guest in the fleet's boot); wait_locator tells when
start_rdma_guest() {
    start_guest "$1" "$2" "$3" "" "<metadata><rdma:migration xmlns:rdma='$VRM_NS'/></metadata>"
}

# wait_locator DOMAIN HOST: the live metadata names HOST's helper
wait_locator() {
    local deadline=$((SECONDS + 30)) md
    # one virsh call a round: under load each takes seconds
    until md=$(virsh -q metadata "$1" --uri "$VRM_NS" --live 2>&1) && grep -q "host=\"$2\"" <<<"$md"; do
        [ $SECONDS -ge $deadline ] && { echo "$md"; fail "no locator of $2 in $1's metadata"; }
        nap 0.2
    done
    say "$1's live metadata: $(tr -d '\n' <<<"$md")"
}

# Host a drives, the others serve: `remote_on HOST CMD` runs CMD (a shell
# snippet, with this library's functions and those of the scenario's
# library) on HOST and prints its output; its status is CMD's. `remote CMD`
# is `remote_on b CMD` (the two-host scenarios). `serve_remote` is every
# other host's loop, until `remote_stop [HOST]` (default b). Each host has
# its own request directory; the counter lives in a file there: `x=$(remote
# ...)` runs in a subshell, whose variables do not come back.
remote_request() {
    local n dir=$SHARED/remote-$1
    mkdir -p "$dir"
    n=$(cat "$dir/.n" 2>/dev/null || echo 0)
    echo $((n + 1)) > "$dir/.n"
    printf '%s\n' "$2" > "$dir/.req-$n"
    mv "$dir/.req-$n" "$dir/req-$n"
    echo "$n"
}
remote_on() {
    local h=$1 n dir=$SHARED/remote-$1 deadline=$((SECONDS + ${REMOTE_TIMEOUT:-300}))
    shift
    n=$(remote_request "$h" "$*")
    until [ -e "$dir/rc-$n" ]; do
        if [ -e "$SHARED/failed-$h" ]; then
            # what the host said before it failed (its FAIL line among it)
            sed "s/^/  [$h] /" "$dir/out-$n" 2>/dev/null
            fail "host $h failed running '$*'"
        fi
        [ $SECONDS -ge $deadline ] && fail "host $h did not run '$*' within ${REMOTE_TIMEOUT:-300} s"
        nap 0.1
    done
    sed "s/^/  [$h] /" "$dir/out-$n"
    return "$(cat "$dir/rc-$n")"
}
remote() { remote_on b "$*"; }
# remote_nowait HOST CMD: ask HOST to run CMD, and do not wait (a host that
# is told to die never answers)
remote_nowait() { remote_request "$1" "$2" > /dev/null; }
remote_stop() { touch "$SHARED/stop-${1:-b}"; }
serve_remote() {
    local n=0 me=$VRM_SANDBOX_HOST dir=$SHARED/remote-$VRM_SANDBOX_HOST
    mkdir -p "$dir"
    while :; do
        until [ -e "$dir/req-$n" ]; do
            [ -e "$SHARED/stop-$me" ] && return 0
            [ -e "$SHARED/failed-a" ] && fail "host a failed"
            nap 0.05
        done
        ( eval "$(cat "$dir/req-$n")" ) > "$dir/out-$n" 2>&1
        echo $? > "$dir/.rc-$n"
        mv "$dir/.rc-$n" "$dir/rc-$n"
        n=$((n + 1))
    done
}

# wait_port_active: this host's RDMA device (again) has port 1 ACTIVE,
# within 10 s (after `rdma link add`)
wait_port_active() {
    local state=/sys/class/infiniband/$VRM_RDMA_DEVICE/ports/1/state deadline=$((SECONDS + 10))
    until grep -q ACTIVE "$state" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { echo "$VRM_RDMA_DEVICE port 1 is not ACTIVE 10 s after it was added"; return 1; }
        nap 0.1
    done
}

# The helper's state directory on a small tmpfs of its own (from then on,
# for the rest of the run), to fill it up: a full disk, for the fault
# matrix. state_dir_fill writes until ENOSPC; state_dir_free makes room.
state_dir_small() {
    mountpoint -q /var/lib/virt-rdma ||
        mount -t tmpfs -o size=4m,mode=0700 vrm-state /var/lib/virt-rdma
}
state_dir_fill() {
    state_dir_small || return 1
    dd if=/dev/zero of=/var/lib/virt-rdma/.fill bs=4k 2>/dev/null
    [ "$(df --output=avail /var/lib/virt-rdma | tail -1)" -eq 0 ]
}
state_dir_free() { rm -f /var/lib/virt-rdma/.fill; }

# wait_record_final ID STATE SECONDS: the job record ID on disk says STATE
wait_record_final() {
    local f=/var/lib/virt-rdma/job-$1.xml deadline=$((SECONDS + $3))
    until grep -q "state=\"$2\"" "$f" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { echo "$f does not say $2 within $3 s"; return 1; }
        nap 0.2
    done
}

# stream_intact WHAT: the a->b migration that just ended moved QEMU's
# stream unchanged: every chunk the source engine sent has the same offset,
# length and digest as the chunk the destination engine handed to QEMU
# (both engines' debug logs: VRM_HELPER_LOG with --engine-debug). This is
# the transport's own proof, apart from the guest's memory check.
stream_intact() {
    local log out
    log=$(ls -t /var/lib/virt-rdma/job-*.log 2>/dev/null | head -1)
    [ -n "$log" ] || fail "no engine log on a for $1"
    remote 'cp "$(ls -t /var/lib/virt-rdma/job-*.log | head -1)" "$SHARED/job-b.log"' >/dev/null ||
        fail "no engine log on b for $1"
    out=$(python3 "$E2E_DIR/stream-digests.py" "$log" "$SHARED/job-b.log") ||
        { echo "$out"; fail "$1: the stream QEMU on b read differs from the one QEMU on a wrote"; }
    say "$1: $out"
    rm -f "$SHARED/job-b.log"
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

# check_verifies DOMAIN BASE: running here, and the guest printed at least
# two "verify ... ok" lines more than BASE: the first may come from a pass
# that was under way at BASE, the second from a pass that began after it,
# which read the whole RAM on this host.
check_verifies() {
    local state deadline=$((SECONDS + 180)) want=$(($2 + 2))
    state=$(virsh domstate "$1" 2>&1)
    [ "$state" = running ] || fail "$1 is '$(virsh domstate --reason "$1" 2>&1)' on this host, not running"
    until [ "$(verify_count "$1")" -ge "$want" ]; do
        grep -q "FAIL" "$GUEST_SERIAL_DIR/$1.serial" 2>/dev/null && { grep vrm-guest "$GUEST_SERIAL_DIR/$1.serial" | tail -3; fail "the guest reports corrupted memory"; }
        [ $SECONDS -ge $deadline ] && fail "guest $1 did not verify its memory within 180 s"
        nap 0.2
    done
    say "guest $1 runs here and its memory verifies: $(grep 'verify' "$GUEST_SERIAL_DIR/$1.serial" | tail -1)"
}

# check_arrived DOMAIN: the guest arrived here by migration, runs, and
# verified its whole RAM here. The QEMU that received it truncated the
# serial file when it started, so every line in it was printed on this host.
check_arrived() {
    check_verifies "$1" 0
}

# ---- disks that are not shared (--copy-storage-all, issue 17) -------------
# The image lives at the same path on both hosts, as libvirt requires
# (it copies into an image that exists on the destination, of the same
# size); the guest rewrites sectors 1..1024 all the time and keeps in its
# RAM which generation each holds; the rest of the 64 MiB is random bytes
# that only the copy can bring.
disk_dir=/var/lib/vrm-disks
disk_sectors=1024

disk_img() { echo "$disk_dir/$1.img"; }   # disk_img NAME: the image's path

disk_image() {   # disk_image NAME random|empty [MIB (64)]
    local img mib=${3:-64}
    img=$(disk_img "$1")
    mkdir -p "$disk_dir" && rm -f "$img" || return 1
    if [ "$2" = random ]; then
        head -c $((mib << 20)) /dev/urandom > "$img"
    else
        truncate -s "${mib}M" "$img"
    fi
}

disk_sum() {     # disk_sum NAME...: the SHA-256 of each whole image, on one line
    local n imgs=()
    for n in "$@"; do imgs+=("$(disk_img "$n")"); done
    sha256sum "${imgs[@]}" | cut -d' ' -f1 | paste -sd' '
}

# define_disk_guest NAME MIB CMDLINE [DATA]: a persistent domain running
# the e2e guest with its image (disk_image NAME random) as IDE disk hda,
# writing sectors 1..$disk_sectors all the time; with DATA, the image
# disk_image DATA as a second disk, hdb, that nothing writes
define_disk_guest() {
    local disks="<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$(disk_img "$1")'/><target dev='hda' bus='ide'/></disk>"
    [ -n "${4:-}" ] && disks+="<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$(disk_img "$4")'/><target dev='hdb' bus='ide'/></disk>"
    sed -e "s|@NAME@|$1|g" -e "s|@MEM@|$2|" -e "s|@KERNEL@|$VRM_GUEST_ELF|" \
        -e "s|@CMDLINE@|$3 disk_sectors=$disk_sectors|" -e "s|@MEMTUNE@||" -e "s|@METADATA@||" \
        -e "s|<devices>|<devices>$disks|" \
        "$E2E_DIR/guest.xml.in" > "/tmp/$1.xml"
    virsh -q define "/tmp/$1.xml" > /dev/null && virsh -q start "$1" > /dev/null || fail "cannot start $1"
    wait_serial "$1" "disk $disk_sectors sectors written" 120
    say "guest $1 running, RAM filled, its disk written"
}

# engine_record_disks N MIN_BYTES: this host's newest engine record is a
# completed job that carried N disk connections and sent more than
# MIN_BYTES
engine_record_disks() {
    local rec
    rec=$(ls -t /var/lib/virt-rdma/job-*.stats.json 2>/dev/null | head -1)
    [ -n "$rec" ] || { echo "no engine record"; return 1; }
    /usr/bin/python3 - "$rec" "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("engine: state %s, disk connections %s, bytes sent %s"
      % (s["state"], s.get("disk-connections"), s["bytes-sent"]))
sys.exit(0 if s["state"] == "completed" and s.get("disk-connections") == int(sys.argv[2])
         and s["bytes-sent"] > int(sys.argv[3]) else 1)
PY
}

# disk_writes NAME: the sector writes of the guest's last complete disk
# verify line here. A line without its newline is left out: the source
# QEMU stops when the migration ends, perhaps in the middle of a number
# ("writes 1" of "writes 1216"; CI at stop 31), and the guest prints the
# rest on the destination.
disk_writes() {
    local log=$GUEST_SERIAL_DIR/$1.serial
    { if [ -n "$(tail -c 1 "$log" 2>/dev/null)" ]; then sed '$d' "$log"; else cat "$log"; fi; } 2>/dev/null |
        grep -o "disk verify [0-9]* sectors [0-9]* ok writes [0-9]*" |
        awk '{ n = $NF } END { print n + 0 }'
}

# wait_disk_verifies NAME N: the guest printed N disk verifications here
wait_disk_verifies() {
    local deadline=$((SECONDS + 180)) log=$GUEST_SERIAL_DIR/$1.serial n
    until n=$(grep -c "disk verify [0-9]* sectors $disk_sectors ok" "$log" 2>/dev/null) && [ "$n" -ge "$2" ]; do
        grep -q "FAIL" "$log" 2>/dev/null && { grep vrm-guest "$log" | tail -3; fail "guest $1 reports a corrupted disk or memory"; }
        [ $SECONDS -ge $deadline ] && fail "guest $1 did not verify its disk $2 times within 180 s"
        nap 0.2
    done
    say "guest $1 verified its disk here: $(grep 'disk verify' "$log" | tail -1)"
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
    # the transparent mode's rules: each goes with its job (deleted by nft
    # without the helper waiting for it)
    while nft list chain inet virt_rdma output 2>/dev/null | grep -q 'virt-rdma job'; do
        if [ $SECONDS -ge $deadline ]; then
            nft list table inet virt_rdma
            fail "a steering rule of the transparent mode was left behind"
        fi
        nap 0.2
    done
    local open
    open=$(grep -l 'state="\(negotiating\|connected\|transferring\)"' /var/lib/virt-rdma/job-*.xml 2>/dev/null)
    [ -z "$open" ] || fail "job records in a non-final state: $open"
    say "no engine, per-domain directory, stats socket, steering rule or open record left behind"
}

# migrate_bounded LIMIT DOMAIN DESTURI OPTIONS...: virsh migrate OPTIONS
# DOMAIN DESTURI, printing virsh's output when it ends, with its status.
# One that still runs after LIMIT s is shown (virsh domjobinfo) and
# aborted (virsh domjobabort); virsh then has 60 s more to end before the
# test fails: a hung migration fails the test with its state instead of
# running into the sandbox's timeout.
migrate_bounded() {
    local limit=$1 dom=$2 dest=$3 pid deadline aborted= rc
    shift 3
    virsh migrate "$@" "$dom" "$dest" > /tmp/migrate-bounded.out 2>&1 &
    pid=$!
    deadline=$((SECONDS + limit))
    while kill -0 "$pid" 2>/dev/null; do
        if [ $SECONDS -ge $deadline ] && [ -z "$aborted" ]; then
            say "virsh migrate of $dom still runs after $limit s; libvirt's job, then virsh domjobabort:"
            virsh domjobinfo "$dom"
            virsh domjobabort "$dom"
            aborted=1
            deadline=$((SECONDS + 60))
        elif [ $SECONDS -ge $deadline ]; then
            kill -9 "$pid"
            cat /tmp/migrate-bounded.out
            fail "virsh migrate of $dom did not end within 60 s of virsh domjobabort"
        fi
        nap 0.5
    done
    wait "$pid"; rc=$?
    cat /tmp/migrate-bounded.out
    return $rc
}

# virsh_scenario DESCRIPTION HARD_LIMIT_MIB VIRSH_MIGRATE_ARGS...: host a
# starts the guest and migrates it to b with plain `virsh migrate`; b
# checks that it runs and that its memory verifies.
virsh_scenario() {
    local what=$1 limit=$2
    shift 2
    start_libvirt
    if [ "$VRM_SANDBOX_HOST" = a ]; then
        # 64 MiB: it proves the harness and the hosts; each MiB costs a
        # quarter of a second under the sandbox's emulation (CI time)
        define_guest g1 64 "dirty_kb=2048" "$limit"
        wait_flag libvirt-b 120
        say "migrating $what"
        # 300 s: a 64 MiB guest takes well under a minute; b waits 400
        migrate_bounded 300 g1 "qemu+tcp://$VRM_PEER_ADDR/system" "$@" || fail "virsh migrate ($what) failed"
        check_migrated_source g1
        flag migrated
        wait_flag verified-b 240
    else
        flag libvirt-b
        wait_flag migrated 400
        check_arrived g1
        flag verified-b
    fi
    say "done"
}

# migration_tls_pki: QEMU's migration certificates in /etc/pki/qemu
# (libvirt's default migrate_tls_x509_cert_dir; the VM's /etc is a tmpfs
# overlay) from a test CA that host a makes at test time in $SHARED/pki.
# Each host gets a server certificate for its name and address (QEMU on
# the destination presents it; the source checks it against
# --tls-destination) and a client certificate (libvirt's default
# migrate_tls_x509_verify: the destination checks the source too).
migration_tls_pki() {
    local pki=$SHARED/pki me=sandbox-$VRM_SANDBOX_HOST h addr deadline
    if [ "$VRM_SANDBOX_HOST" = a ]; then
        mkdir -p "$pki/.new"
        (
            cd "$pki/.new" || exit 1
            certtool --generate-privkey --key-type ecdsa --outfile ca-key.pem 2>/dev/null &&
            printf 'cn = virt-rdma e2e test CA\nca\ncert_signing_key\nexpiration_days = 2\n' > ca.info &&
            certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info \
                --outfile ca-cert.pem 2>/dev/null || exit 1
            for h in a b; do
                [ $h = a ] && addr=198.18.0.1 || addr=198.18.0.2
                certtool --generate-privkey --key-type ecdsa --outfile sandbox-$h-key.pem 2>/dev/null &&
                printf 'cn = sandbox-%s\ndns_name = sandbox-%s\nip_address = %s\ntls_www_server\ntls_www_client\nsigning_key\nexpiration_days = 2\n' \
                    $h $h $addr > $h.info &&
                certtool --generate-certificate --load-privkey sandbox-$h-key.pem --load-ca-certificate ca-cert.pem \
                    --load-ca-privkey ca-key.pem --template $h.info --outfile sandbox-$h-cert.pem 2>/dev/null || exit 1
            done
        ) || fail "cannot make the migration TLS certificates"
        rm -f "$pki/.new/ca-key.pem"
        mv "$pki/.new"/* "$pki/" && touch "$pki/done"
    else
        deadline=$((SECONDS + 120))
        until [ -e "$pki/done" ]; do
            [ $SECONDS -ge $deadline ] && fail "no migration TLS certificates from host a"
            nap 0.2
        done
    fi
    # one key and certificate serve as server and as client (both usages)
    install -d -m 0755 /etc/pki/qemu
    install -m 0644 "$pki/ca-cert.pem" /etc/pki/qemu/ca-cert.pem
    install -m 0644 "$pki/$me-cert.pem" /etc/pki/qemu/server-cert.pem
    install -m 0644 "$pki/$me-cert.pem" /etc/pki/qemu/client-cert.pem
    install -m 0600 "$pki/$me-key.pem" /etc/pki/qemu/server-key.pem
    install -m 0600 "$pki/$me-key.pem" /etc/pki/qemu/client-key.pem
    say "migration TLS certificates in /etc/pki/qemu ($me, test CA)"
}

# wire_capture_start: tap this host's wire (the sandbox's emulated link)
# for RoCE v2 packets (UDP 4791), counting the guest's known plaintext in
# them (plaintext-count.py) until wire_capture_stop
wire_capture_start() {
    local ifc deadline=$((SECONDS + 20))
    ifc=$(ip -o -4 addr show | awk -v a="$VRM_SELF_ADDR" 'index($4, a "/") == 1 { print $2 }')
    [ -n "$ifc" ] || fail "no interface has $VRM_SELF_ADDR"
    rm -f /tmp/capture.err /tmp/capture.count
    ( tcpdump -i "$ifc" -n -s 0 -U -B 65536 -w - udp port 4791 2>/tmp/capture.err |
          /usr/bin/python3 "$E2E_DIR/plaintext-count.py" > /tmp/capture.count ) &
    until grep -q "listening on" /tmp/capture.err 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { cat /tmp/capture.err; fail "tcpdump did not start on $ifc"; }
        nap 0.2
    done
}

# wire_capture_stop: end the tap; prints "captured N bytes, guest
# plaintext found M times" and tcpdump's own counts
wire_capture_stop() {
    local deadline=$((SECONDS + 60))
    pkill -INT -x tcpdump
    until [ -s /tmp/capture.count ]; do
        [ $SECONDS -ge $deadline ] && fail "the wire capture did not end"
        nap 0.2
    done
    cat /tmp/capture.count
    grep -E "packets (captured|received|dropped)" /tmp/capture.err | tr '\n' ' '; echo
}

# plaintext_check WHAT clear|tls: judge the last wire capture of this
# (source) host against its last job (/tmp/jobinfo.txt). clear: the guest's
# plaintext is on the wire (the tap sees what the engines carry; the
# control); tls: the tap saw at least half of the memory processed, and
# not once the guest's plaintext
plaintext_check() {
    /usr/bin/python3 - "$1" "$2" <<'PY' || fail "$1: the plaintext check failed"
import re, sys
what, mode = sys.argv[1], sys.argv[2]
cap = open("/tmp/capture.count").read()
m = re.search(r"captured (\d+) bytes, guest plaintext found (\d+) times", cap)
if not m:
    sys.exit("%s: no capture result: %r" % (what, cap))
captured, found = int(m.group(1)), int(m.group(2))
jobinfo = open("/tmp/jobinfo.txt").read()
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
j = re.search(r"^Memory processed:\s+([\d.]+) (\w+)", jobinfo, re.M)
mem = float(j.group(1)) * units[j.group(2)] if j else 0
print("%s: the wire tap captured %d bytes of RoCE packets for %.0f bytes of memory processed; "
      "the guest's plaintext found %d times" % (what, captured, mem, found))
if mode == "clear":
    # the pattern is in every page the guest filled: a working tap finds it
    # in most of the 4 KiB pages sent (14822 times for 64 MiB, 6647 for 32)
    pages = mem / 4096
    sys.exit(0 if pages and found >= pages / 2 else
             "the tap found the guest's plaintext %d times in a clear-text migration of %d pages: "
             "it does not see the migration" % (found, pages))
if captured < mem / 2:
    sys.exit("the tap saw less than half of the migration: it proves nothing")
sys.exit(0 if found == 0 else "the guest's memory crossed the wire in clear text")
PY
}

# migrate_bg NAME TOOL DESTURI [ARGS...]: a migration of NAME in the
# background; its output in /tmp/mig-NAME.out, its status in
# /tmp/mig-NAME.rc once it ended (also when host b runs it, through remote)
migrate_bg() {
    local g=$1 tool=$2 dest=$3
    shift 3
    rm -f "/tmp/mig-$g.rc"
    if [ "$tool" = virsh ]; then
        ( virsh migrate --live --p2p --persistent "$@" --migrateuri "$(virt-rdma uri "$g")" "$g" "$dest" > "/tmp/mig-$g.out" 2>&1
          echo $? > "/tmp/mig-$g.rc" ) &
    else
        ( virt-rdma migrate --live --p2p --persistent "$@" "$g" "$dest" > "/tmp/mig-$g.out" 2>&1
          echo $? > "/tmp/mig-$g.rc" ) &
    fi
}

# host_counts: what a long run of migrations must not make grow on this
# host, as KEY=VALUE words: open fds of virt-rdmad and of libvirtd, memory
# pinned by all processes (VmPin), job records, entries under
# /run/virt-rdma; and virt-rdmad's resident memory (shown, not compared)
host_counts() {
    local h l
    h=$(cat /tmp/virt-rdmad.pid) l=$(pidof libvirtd)
    echo "helper-fds=$(ls /proc/$h/fd | wc -l) libvirtd-fds=$(ls /proc/$l/fd | wc -l)" \
        "pinned-kB=$(awk '/^VmPin:/ { s += $2 } END { print s + 0 }' /proc/[0-9]*/status 2>/dev/null)" \
        "records=$(ls /var/lib/virt-rdma/job-*.xml 2>/dev/null | wc -l)" \
        "run-entries=$(find /run/virt-rdma -mindepth 1 | wc -l)" \
        "helper-rss-kB=$(awk '/^VmRSS:/ { print $2 }' /proc/$h/status)"
}

# job_records: the names of this host's job records, sorted
job_records() { ls /var/lib/virt-rdma | grep -E '^job-[0-9]+\.xml$' | sort; }

# job_records_since LIST: the job records that are not in LIST (a
# job_records of before)
job_records_since() { job_records | comm -13 "$1" -; }

# records_not_completed_since LIST: print the job records not in LIST that
# are not completed; false if there are none. Records kept from before
# may have failed on purpose.
records_not_completed_since() {
    job_records_since "$1" | while read -r r; do
        grep -q 'state="completed"' "/var/lib/virt-rdma/$r" || echo "$r"
    done | grep .
}

# leftovers_both: check_no_leftovers here and on host b (host a only)
leftovers_both() {
    check_no_leftovers
    remote check_no_leftovers || fail "something was left behind on b"
}

# serve_as_b: host b of the two-host scenarios: its helper, the hook and
# libvirtd, then whatever host a asks, until a says stop
serve_as_b() {
    start_virt_rdma
    start_libvirt
    flag ready-b
    serve_remote
    say "done"
    exit 0
}
