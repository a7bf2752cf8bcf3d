#!/bin/bash
# stock-host.sh DEB_DIR SCENARIO...: virt-rdma on libvirt hosts set up as
# Debian 12 sets them up, from the project's packages. Each sandbox host,
# once for all the SCENARIOs (one boot):
#
#   - installs libvirt-daemon-system (which brings Debian's default
#     qemu.conf: QEMU as libvirt-qemu, dynamic ownership, the AppArmor
#     security driver, and libvirt's AppArmor profiles) and the built
#     virt-rdma packages with dpkg; the VM's root is a tmpfs overlay, the
#     machine itself is untouched;
#   - loads the AppArmor profiles in enforce mode (as apparmor.service
#     would) and starts virtlogd and libvirtd; libvirtd.conf only gets the
#     TCP listener of the sandbox and the socket access that Debian grants
#     the group libvirt through polkit (no polkitd in the VM);
#   - starts virt-rdmad through systemd-socket-activate with the socket,
#     group and mode of the installed virt-rdmad.socket;
#   - checks that libvirtd runs in its AppArmor profile in enforce mode.
#
# Then, for each SCENARIO in turn, host a starts an e2e guest of its own
# (g-SCENARIO), checks that its QEMU runs as libvirt-qemu in its own
# enforced AppArmor profile and that its memory fills, and migrates it to b:
#
#   socket-path   plain `virsh migrate --parallel --parallel-connections 4`
#                 over unix:///run/virt-rdma/qemu/<uuid>/migrate.sock, with
#                 unix-tunnel.py standing in for the engines (run as
#                 virt-rdma-engine, the directories made as virt-rdmad will
#                 make them): proves that a confined QEMU can create, listen
#                 on and connect to its socket there
#   one-channel   `virt-rdma migrate --live --p2p --persistent`, run by a
#                 non-root user in the groups virt-rdma and libvirt, over
#                 RDMA: the two hosts' virt-rdmad (one cluster key, the
#                 packaged configuration with the device and the channel's
#                 address set) negotiate it, the engines run as
#                 virt-rdma-engine, the guest is RDMA-enabled by its
#                 metadata
#                 -- and copies the guest's disk, which is not shared
#                 (--copy-storage-all --suspend): a 64 MiB raw image of
#                 random bytes that the guest keeps writing, labelled by
#                 libvirt for QEMU, its NBD socket nbd.sock beside
#                 migrate.sock under the guest's profile; the image's
#                 SHA-256 on b (the guest paused there) must be a's, then
#                 the guest resumes and verifies its memory and its disk
#   parallel      the same with --parallel --parallel-connections 4
#   auto-converge the same with --auto-converge (initial 40 %, increment
#                 20 %) for a guest that dirties faster than the 4 MiB/s
#                 the migration may use (32 MiB, rewriting 8 MiB without
#                 pausing to verify for 8 sweeps): QEMU's monitor shows
#                 auto-converge and XBZRLE on, throttle steps 40/20; QEMU
#                 throttles the guest's CPU (libvirt's "Auto converge
#                 throttle" rises above 0; a completion before that is
#                 said, not failed: QEMU may finish while the guest
#                 verifies), then the bandwidth cap is lifted and the
#                 migration ends; with XBZRLE (--compressed --comp-methods
#                 xbzrle), pages sent again go as deltas (Compressed pages
#                 > 0 in the completed job)
#   postcopy-recovery  the operator's `virt-rdma migrate --postcopy` (a
#                 64 MiB guest at 4 MiB/s), switched by the operator's `virsh
#                 migrate-postcopy`; root kills a's engine (SIGKILL) in
#                 post-copy; the same operator resumes with `virt-rdma
#                 migrate --postcopy-resume`: the helpers' recovery job is
#                 theirs (it inherits the broken job's owner), both QEMUs
#                 confined; the completed job says which job it recovers
#
# b checks that the guest runs there, as libvirt-qemu and confined, and
# that its memory verifies, then removes it (a removes its shut-off
# definition) before the next scenario. Both hosts print the AppArmor
# denials the kernel logged. DEB_DIR holds the .deb files of tools/build-debs.sh; the
# libvirt-daemon-system package is taken from $VRM_LIBVIRT_DEB_DIR
# (default /var/cache/virt-rdma-sandbox, filled by tools/install-deps.sh).
set -u
. "$(dirname "$0")/e2e-lib.sh"
deb_dir=$1
shift
scenarios=("$@")
libvirt_deb_dir=${VRM_LIBVIRT_DEB_DIR:-/var/cache/virt-rdma-sandbox}
dest=qemu+tcp://$VRM_PEER_ADDR/system
user=vrmadmin

[ ${#scenarios[@]} -gt 0 ] || { echo "usage: stock-host.sh DEB_DIR SCENARIO..." >&2; exit 2; }
for scenario in "${scenarios[@]}"; do
    case "$scenario" in
        socket-path|one-channel|parallel|auto-converge|postcopy-recovery) ;;
        *) echo "stock-host.sh: unknown scenario '$scenario'" >&2; exit 2 ;;
    esac
done

at_exit() {
    local d
    [ -s /tmp/tunnel.log ] && { say "unix-tunnel.py's log:"; cat /tmp/tunnel.log; }
    [ -d /run/virt-rdma ] && ls -la /run/virt-rdma
    [ -d /run/virt-rdma/qemu ] && ls -lR /run/virt-rdma/qemu
    if [ -e "$SHARED/failed-a" ] || [ -e "$SHARED/failed-b" ]; then
        say "QEMU's log of ${guest:-?}:"; tail -15 "/var/log/libvirt/qemu/${guest:-none}.log" 2>/dev/null
        say "libvirtd's errors:"; grep -E " error " /var/log/libvirt/libvirtd.log 2>/dev/null | tail -10
        [ -s /tmp/virt-rdmad.log ] && { say "virt-rdmad's log:"; tail -30 /tmp/virt-rdmad.log; }
    fi
    d=$(dmesg | grep 'apparmor="DENIED"')
    if [ -n "$d" ]; then
        say "AppArmor denials on this host:"
        echo "$d"
    else
        say "AppArmor denials on this host: none"
    fi
}
trap at_exit EXIT

# Nothing was refused: the guests, libvirtd and the hook did all they had to.
no_denials() {
    dmesg | grep -q 'apparmor="DENIED"' && fail "AppArmor refused something on this host"
    say "no AppArmor denial on this host"
}

# profile_of PID: the AppArmor label of a process, e.g. "libvirtd (enforce)"
profile_of() { tr -d '\0' < "/proc/$1/attr/current"; }

install_packages() {
    local lds debs
    mountpoint -q /sys/kernel/security ||
        mount -t securityfs securityfs /sys/kernel/security || fail "cannot mount securityfs"
    [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" = Y ] ||
        fail "AppArmor is not enabled in the sandbox kernel"
    aa-enabled >/dev/null || fail "aa-enabled says AppArmor is not usable"

    # man-db's trigger rebuilds its index from every manual page, which
    # takes minutes over the VM's 9p root; it plays no part here. This is
    # what answering "no" to man-db/auto-update does.
    rm -f /var/lib/man-db/auto-update
    lds=$(ls "$libvirt_deb_dir"/libvirt-daemon-system_*.deb 2>/dev/null | tail -1)
    [ -n "$lds" ] || fail "no libvirt-daemon-system .deb in $libvirt_deb_dir: run tools/install-deps.sh"
    # Its other dependencies (network and nwfilter configuration, logrotate,
    # iptables, the systemd glue) play no part here.
    say "dpkg -i --force-depends $(basename "$lds")"
    dpkg -i --force-depends "$lds" > /tmp/dpkg-libvirt.log 2>&1 ||
        { cat /tmp/dpkg-libvirt.log; fail "cannot install libvirt-daemon-system"; }
    grep -E "^(Setting up|dpkg: warning)" /tmp/dpkg-libvirt.log | head -3

    debs=()
    for p in virt-rdma-common virt-rdmad virt-rdma libvirtrdma0; do
        f=$(ls "$deb_dir/${p}_"*.deb 2>/dev/null | tail -1)
        [ -n "$f" ] || fail "no $p package in $deb_dir: run tools/build-debs.sh"
        debs+=("$f")
    done
    say "dpkg -i ${debs[*]##*/}"
    dpkg -i "${debs[@]}" || fail "dpkg -i of the virt-rdma packages failed"
    getent group virt-rdma || fail "the package did not create the group virt-rdma"
    getent passwd virt-rdma-engine || fail "the package did not create the user virt-rdma-engine"
    id libvirt-qemu || fail "libvirt-daemon-system did not create libvirt-qemu"
    dpkg-query -W -f='${Package} ${Version} ${Status}\n' virt-rdmad virt-rdma virt-rdma-common libvirtrdma0 libvirt-daemon-system
}

# What Debian 12 asks of an administrator for virt-rdma under AppArmor
# (docs/install.rst): the guest abstraction from libvirt-qemu's local
# additions.
add_apparmor_include() {
    local f=/etc/apparmor.d/local/abstractions/libvirt-qemu
    [ "${VRM_STOCK_NO_QEMU_RULES:-0}" = 1 ] && { say "NOT including abstractions/virt-rdma-qemu (VRM_STOCK_NO_QEMU_RULES=1)"; return; }
    [ -e "$f" ] || fail "$f is missing: libvirt-daemon-system creates it"
    echo "include if exists <abstractions/virt-rdma-qemu>" >> "$f"
    say "$f: $(tr '\n' ' ' < "$f")"
}

load_apparmor() {
    local p
    # As apparmor.service does at boot: every profile, enforce mode.
    for p in /etc/apparmor.d/usr.sbin.libvirtd /etc/apparmor.d/usr.lib.libvirt.virt-aa-helper; do
        apparmor_parser -r -W "$p" || fail "apparmor_parser cannot load $p"
    done
    grep -E '^(libvirtd|virt-aa-helper|/usr/lib/libvirt/virt-aa-helper) ' /sys/kernel/security/apparmor/profiles
    grep -q '^libvirtd (enforce)' /sys/kernel/security/apparmor/profiles ||
        fail "the libvirtd profile is not loaded in enforce mode"
}

start_virtlogd() {
    virtlogd --daemon || fail "virtlogd did not start"
}

start_stock_libvirtd() {
    local uuid pid
    # one per host (a to d are hex digits): libvirt refuses a migration
    # between two hosts of the same UUID
    uuid=5f0b6d2e-7a1c-4c3e-9d01-00000000000$VRM_SANDBOX_HOST
    # Debian's libvirtd.conf is all comments; the sandbox adds its listener.
    # qemu.conf stays Debian's.
    cat >> /etc/libvirt/libvirtd.conf <<CONF
listen_tls = 0
listen_tcp = 1
auth_tcp = "none"
listen_addr = "$VRM_SELF_ADDR"
host_uuid = "$uuid"
unix_sock_group = "libvirt"
unix_sock_rw_perms = "0770"
auth_unix_rw = "none"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
CONF
    say "qemu.conf settings (Debian's defaults, none set): $(grep -cvE '^\s*(#|$)' /etc/libvirt/qemu.conf)"
    qemu_caps_restore stock
    libvirtd --listen --daemon --pid-file /run/libvirtd.pid || fail "libvirtd did not start"
    local deadline=$((SECONDS + 90))
    until virsh -c qemu:///system version >/dev/null 2>&1; do
        [ $SECONDS -ge $deadline ] && { tail -20 /var/log/libvirt/libvirtd.log; fail "libvirtd did not answer within 90 s"; }
        nap 0.2
    done
    qemu_caps_save stock
    pid=$(cat /run/libvirtd.pid)
    say "libvirtd pid $pid runs in AppArmor profile: $(profile_of "$pid")"
    [ "$(profile_of "$pid")" = "libvirtd (enforce)" ] || fail "libvirtd is not confined by its profile in enforce mode"
    virsh -c qemu:///system capabilities | grep -A1 '<secmodel>' | grep -o '<model>[a-z]*</model>' | tr '\n' ' '; echo
    virsh -c qemu:///system capabilities | grep -q '<model>apparmor</model>' ||
        fail "libvirt does not use its AppArmor security driver"
}

# For virt-rdma's own migrations: the helpers' cluster key, and what an
# administrator sets in the packaged configuration (the RDMA device and
# address, the helper's channel address and name), by editing the shipped
# lines.
configure_helper() {
    local conf=/etc/virt-rdma/virt-rdmad.conf
    cluster_key
    sed -i -e "s|^#device=.*|device=$VRM_RDMA_DEVICE|" \
           -e "s|^#address=192.0.2.10\$|address=$VRM_SELF_ADDR|" \
           -e "s|^#host=.*|host=sandbox-$VRM_SANDBOX_HOST|" \
           -e "s|^#address=10.0.0.17\$|address=$VRM_SELF_ADDR|" "$conf"
    grep -vE '^(#|$)' "$conf" | tr '\n' ' '; echo
    /usr/sbin/virt-rdmad --check-config > /dev/null || fail "the edited $conf is refused"
}

# The socket unit, done by hand: systemd-socket-activate listens on the
# unit's socket and starts the service's ExecStart on the first connection.
start_helper_socket_activated() {
    local unit=/lib/systemd/system/virt-rdmad.socket service=/lib/systemd/system/virt-rdmad.service
    local listen group mode dirmode exec deadline
    listen=$(sed -n 's/^ListenStream=//p' "$unit")
    group=$(sed -n 's/^SocketGroup=//p' "$unit")
    mode=$(sed -n 's/^SocketMode=//p' "$unit")
    dirmode=$(sed -n 's/^DirectoryMode=//p' "$unit")
    exec=$(sed -n 's/^ExecStart=//p' "$service")
    say "socket unit: $listen $group $mode; service: $exec"
    mkdir -p -m "$dirmode" "$(dirname "$listen")"
    # systemd would create /var/lib/virt-rdma (StateDirectory=) too.
    systemd-socket-activate -l "$listen" $exec > /tmp/virt-rdmad.log 2>&1 &
    echo $! > /tmp/virt-rdmad.pid
    deadline=$((SECONDS + 30))
    until [ -S "$listen" ]; do
        [ $SECONDS -ge $deadline ] && { cat /tmp/virt-rdmad.log; fail "systemd-socket-activate did not open $listen"; }
        nap 0.1
    done
    # SocketUser=/SocketGroup=/SocketMode=, which systemd-socket-activate
    # does not take as options.
    chown "root:$group" "$listen" && chmod "$mode" "$listen" || fail "cannot set up $listen"
    ls -l "$listen"
}

make_admin_user() {
    adduser --quiet --disabled-password --gecos "" "$user" || fail "cannot create $user"
    adduser --quiet "$user" virt-rdma && adduser --quiet "$user" libvirt || fail "cannot add $user to its groups"
    say "management user: $(id "$user")"
}

# The group of the socket unit works: a member of virt-rdma reaches the
# socket-activated helper, a user outside it does not.
check_helper_access() {
    local probe='import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])'
    local sock=/run/virt-rdma/virt-rdmad.sock
    runuser -u "$user" -- python3 -c "$probe" "$sock" ||
        fail "$user, in the group virt-rdma, cannot connect to $sock"
    adduser --quiet --disabled-password --gecos "" vrmother || fail "cannot create vrmother"
    if runuser -u vrmother -- python3 -c "$probe" "$sock" 2>/dev/null; then
        fail "vrmother, outside the group virt-rdma, could connect to $sock"
    fi
    say "$sock: $user (in virt-rdma) may connect, vrmother (not in it) may not"
    ls -ld /run/virt-rdma "$sock"
    say "virt-rdma capabilities, as $user:"
    local caps rc
    caps=$(runuser -u "$user" -- virt-rdma capabilities 2>&1); rc=$?
    echo "$caps"
    say "(virt-rdma capabilities: status $rc)"
    # Debian's default (vm.unprivileged_userfaultfd=0), before
    # postcopy-recovery changes it: the operator learns here why QEMU, as
    # libvirt-qemu, cannot receive post-copy
    echo "$caps" | grep -q "^Post-copy: *only by a QEMU that runs as root (vm.unprivileged_userfaultfd = 0" ||
        fail "virt-rdma capabilities does not say that post-copy needs vm.unprivileged_userfaultfd on a stock host"
    # the install's manual steps, as capabilities checks them (issue 35):
    # libvirtd started after the package put the hook in place, and the
    # QEMU profile includes virt-rdma's rule (unless this run leaves it out)
    echo "$caps" | grep -qE "^ +libvirtd \(pid [0-9]+\) started after the hook was installed: it runs it" ||
        fail "virt-rdma capabilities does not see that libvirtd runs the hook"
    if [ "${VRM_STOCK_NO_QEMU_RULES:-0}" = 1 ]; then
        echo "$caps" | grep -qF "libvirt's QEMU profile does not include virt-rdma's AppArmor rule" ||
            fail "virt-rdma capabilities does not see the missing AppArmor include"
    else
        echo "$caps" | grep -qE "^AppArmor: +libvirt's QEMU profile includes virt-rdma's rule" ||
            fail "virt-rdma capabilities does not see the AppArmor include"
    fi
}

# check_guest_confined DOMAIN: its QEMU runs as libvirt-qemu in the
# domain's own AppArmor profile, enforced.
check_guest_confined() {
    local pid uuid label who
    pid=$(cat "/run/libvirt/qemu/$1.pid" 2>/dev/null) || fail "no pid file for $1"
    uuid=$(virsh domuuid "$1" | head -1)
    who=$(ps -o user= -p "$pid")
    label=$(profile_of "$pid")
    say "QEMU of $1: pid $pid, user $who, AppArmor $label"
    ps -o user,pid,comm -p "$pid"
    [ "$who" = libvirt-qemu ] || fail "QEMU of $1 runs as '$who', not libvirt-qemu"
    [ "$label" = "libvirt-$uuid (enforce)" ] || fail "QEMU of $1 is not in the enforced profile libvirt-$uuid"
    grep "^libvirt-$uuid " /sys/kernel/security/apparmor/profiles
}

# migration_dir UUID: what virt-rdmad makes for a domain's migration
# (docs/install.rst): owner the QEMU user, group virt-rdma-engine, 02750.
migration_dir() {
    install -d -o root -g root -m 0755 /run/virt-rdma/qemu
    install -d -o libvirt-qemu -g virt-rdma-engine -m 02750 "/run/virt-rdma/qemu/$1"
}

install_packages
add_apparmor_include
load_apparmor
# every scenario but socket-path needs it; socket-path does not mind it
configure_helper
start_helper_socket_activated
start_virtlogd
start_stock_libvirtd
make_admin_user
check_helper_access

tunnel_port=49200

# on_b SCENARIO: host b's part of one scenario
on_b() {
    local scenario=$1 uuid sock tunnel= sum
    wait_flag "guest-a-$scenario" 300
    uuid=$(cat "$SHARED/guest-uuid-$scenario")
    sock=/run/virt-rdma/qemu/$uuid/migrate.sock
    if [ "$scenario" = socket-path ]; then
        migration_dir "$uuid"
        python3 "$E2E_DIR/unix-tunnel.py" destination "$VRM_SELF_ADDR:$tunnel_port" "$sock" virt-rdma-engine > /tmp/tunnel.log 2>&1 &
        tunnel=$!
    fi
    # A relaxed setting, for post-copy only: the destination QEMU, as
    # libvirt-qemu without CAP_SYS_PTRACE, needs userfaultfd, which
    # Debian's kernel refuses such users (vm.unprivileged_userfaultfd=0)
    # and for which libvirt 9.0 does not hand QEMU /dev/userfaultfd;
    # without it libvirt fails with "Postcopy is not supported"
    # (docs/install.rst)
    if [ "$scenario" = postcopy-recovery ]; then
        sysctl -q -w vm.unprivileged_userfaultfd=1 || fail "cannot allow userfaultfd for QEMU"
    fi
    # the destination's image: there, of the same size (libvirt copies into it)
    if [ "$scenario" = one-channel ]; then
        disk_image "$guest" empty || fail "cannot make $guest's empty image"
    fi
    flag "ready-b-$scenario"
    wait_flag "migrated-$scenario" 600
    if [ "$scenario" = one-channel ]; then
        [ "$(virsh domstate "$guest")" = paused ] || fail "$guest is '$(virsh domstate "$guest")' on b after --suspend, not paused"
        sum=$(disk_sum "$guest")
        say "disk image SHA-256: a $(cat "$SHARED/disk-sum-$scenario"), b $sum"
        [ "$sum" = "$(cat "$SHARED/disk-sum-$scenario")" ] || fail "b's copy of $guest's disk is not a's"
        virsh -q resume "$guest" || fail "cannot resume $guest on b"
    fi
    check_arrived "$guest"
    [ "$scenario" = one-channel ] && wait_disk_verifies "$guest" 2
    check_guest_confined "$guest"
    if [ -n "$tunnel" ]; then
        kill "$tunnel"; wait "$tunnel" 2>/dev/null
        cat /tmp/tunnel.log
        grep -q "unix-tunnel: 5 connection" /tmp/tunnel.log || fail "the tunnel did not carry 5 connections (main + 4 multifd)"
        rm -f /tmp/tunnel.log
        rm -rf "/run/virt-rdma/qemu/$uuid"
    fi
    no_denials
    # the next scenario's guest gets the CPU
    virsh -q destroy "$guest" && virsh -q undefine "$guest" || fail "cannot remove $guest"
    rm -f "$(disk_img "$guest")"
    flag "verified-b-$scenario"
}

# check_compressed_xbzrle DOMAIN: QEMU sent pages again as XBZRLE deltas
check_compressed_xbzrle() {
    local pages
    pages=$(virsh domjobinfo --completed --keep-completed "$1" | sed -n 's/^Compressed pages: *\([0-9]*\).*/\1/p')
    [ "${pages:-0}" -gt 0 ] || fail "XBZRLE: no page was sent as a delta (Compressed pages: ${pages:-none})"
    say "XBZRLE: $pages pages sent as deltas over RDMA"
}

# check_qemu_auto_converge NAME: QEMU, mid-migration, has auto-converge
# and XBZRLE on and the throttle steps virt-rdma migrate was given (40 %,
# then 20 % more). Through QEMU's monitor: tainting the domain is fine here.
check_qemu_auto_converge() {
    { virsh -q qemu-monitor-command "$1" '{"execute":"query-migrate-capabilities"}' &&
      virsh -q qemu-monitor-command "$1" '{"execute":"query-migrate-parameters"}'; } |
        /usr/bin/python3 -c '
import json, sys
caps, params = [json.loads(line)["return"] for line in sys.stdin if line.strip()]
on = {c["capability"] for c in caps if c["state"]}
initial, increment = params.get("cpu-throttle-initial"), params.get("cpu-throttle-increment")
print("QEMU: auto-converge %s, xbzrle %s, cpu-throttle-initial %s, cpu-throttle-increment %s"
      % ("auto-converge" in on, "xbzrle" in on, initial, increment))
sys.exit(0 if {"auto-converge", "xbzrle"} <= on and (initial, increment) == (40, 20) else 1)' ||
        fail "QEMU does not migrate $1 with auto-converge, XBZRLE and throttle steps 40/20"
}

# postcopy_recovery: a's part of the scenario of that name (above)
postcopy_recovery() {
    local opts mig rc state deadline
    opts=(--live --p2p --persistent --postcopy --bandwidth 4 --postcopy-bandwidth 4)
    say "as $user: virt-rdma migrate -c qemu:///system ${opts[*]} $guest $dest"
    runuser -u "$user" -- virt-rdma migrate -c qemu:///system "${opts[@]}" "$guest" "$dest" > /tmp/pc.out 2>&1 &
    mig=$!
    # the switch asked for as soon as QEMU migrates (libvirt refuses it
    # before): post-copy then carries nearly all of the 64 MiB at 4 MiB/s.
    # Asked once 1 MiB had moved, a sandbox run on a loaded machine saw the
    # switch come as late as 60 of 64 MiB (37 page requests), too short a
    # post-copy to be seen
    deadline=$((SECONDS + 120))
    until runuser -u "$user" -- virsh -q -c qemu:///system migrate-postcopy "$guest" 2> /tmp/pc.switch; do
        if ! kill -0 "$mig" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
            cat /tmp/pc.out /tmp/pc.switch
            fail "virsh migrate-postcopy as $user was refused until the migration ended or for 120 s"
        fi
        nap 0.2
    done
    say "virsh migrate-postcopy as $user accepted; $(virsh domjobinfo "$guest" | grep -E '^Data processed:' | tr -s ' ')"
    wait_postcopy "$guest" "$mig" || { cat /tmp/pc.out; fail "no post-copy seen"; }
    pkill -KILL -f '^[^ ]*/virt-rdma-engine( |$)' || fail "no engine to kill on a"
    deadline=$((SECONDS + 60))
    while kill -0 "$mig" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && fail "virt-rdma migrate did not end within 60 s of the engine's death"
        nap 0.2
    done
    wait "$mig"; rc=$?
    tr '\r' '\n' < /tmp/pc.out | grep -v '^$' | tail -3
    [ $rc != 0 ] || fail "virt-rdma migrate succeeded although its engine was killed in post-copy"
    state=$(virsh domstate --reason "$guest")
    say "post-copy broken: $guest on a is '$state'"
    [ "$state" = "paused (post-copy failed)" ] || fail "$guest is '$state' on a, not paused (post-copy failed)"
    say "as $user: virt-rdma migrate -c qemu:///system --live --p2p --persistent --postcopy --postcopy-resume $guest $dest"
    runuser -u "$user" -- env VRM_LOG_LEVEL=info virt-rdma migrate -c qemu:///system --live --p2p --persistent \
        --postcopy --postcopy-resume "$guest" "$dest" > /tmp/pc.out 2>&1 || {
        cat /tmp/pc.out; tail -20 /tmp/virt-rdmad.log
        fail "the recovery over RDMA as $user failed"
    }
    tr '\r' '\n' < /tmp/pc.out | grep -v '^$' | tail -3
    runuser -u "$user" -- virt-rdma jobinfo -c qemu:///system --completed --keep-completed "$guest" > /tmp/pc.info ||
        fail "virt-rdma jobinfo --completed as $user failed"
    grep -E "^(RDMA job|RDMA recovers job|RDMA bytes sent|Postcopy requests):" /tmp/pc.info
    grep -qE "^RDMA recovers job: +[0-9]+" /tmp/pc.info ||
        fail "the completed job of $user does not say which job the recovery recovers"
}

# on_a SCENARIO: host a's part: its guest, the migration, the checks
on_a() {
    local scenario=$1 uuid sock tunnel opts out rc
    # the guest; b learns its UUID, which names its migration socket
    if [ "$scenario" = auto-converge ]; then
        define_guest "$guest" 32 "dirty_kb=8192 verify_every=8"
    elif [ "$scenario" = one-channel ]; then
        disk_image "$guest" random || fail "cannot make $guest's image"
        define_disk_guest "$guest" 32 "dirty_kb=512"
    elif [ "$scenario" = postcopy-recovery ]; then
        # 64 MiB, as the fault matrix's post-copy rows: at 4 MiB/s, the
        # first pass (16 s) is still under way at the switch and post-copy
        # lasts seconds, even where the guest pulls its pages fast
        define_guest "$guest" 64 "dirty_kb=2048"
    else
        # 32 MiB: each MiB costs a quarter of a second under the sandbox's
        # emulation (more through socket-path's Python tunnel), and the
        # scenarios test the confined paths (CI time)
        define_guest "$guest" 32 "dirty_kb=2048"
    fi
    check_guest_confined "$guest"
    # RDMA-enabled: the helper puts its locator into the live metadata
    [ "$scenario" = socket-path ] || enable_rdma "$guest"
    uuid=$(virsh domuuid "$guest" | head -1)
    sock=/run/virt-rdma/qemu/$uuid/migrate.sock
    echo "$uuid" > "$SHARED/guest-uuid-$scenario"
    flag "guest-a-$scenario"
    wait_flag "ready-b-$scenario" 300

    case "$scenario" in
        socket-path)
            migration_dir "$uuid"
            python3 "$E2E_DIR/unix-tunnel.py" source "$sock" "$VRM_PEER_ADDR:$tunnel_port" virt-rdma-engine > /tmp/tunnel.log 2>&1 &
            tunnel=$!
            for _ in $(seq 50); do [ -S "$sock" ] && break; nap 0.1; done
            ls -ld "/run/virt-rdma/qemu/$uuid" "$sock"
            say "virsh migrate --live --p2p --persistent --parallel --parallel-connections 4 --migrateuri unix://$sock $guest $dest"
            virsh migrate --live --p2p --persistent --parallel --parallel-connections 4 \
                --migrateuri "unix://$sock" "$guest" "$dest" || fail "virsh migrate over $sock failed"
            kill "$tunnel"; wait "$tunnel" 2>/dev/null
            cat /tmp/tunnel.log
            rm -f /tmp/tunnel.log
            # the directory was made by hand, as virt-rdmad would
            rm -rf "/run/virt-rdma/qemu/$uuid" ;;
        one-channel|parallel)
            opts=(--live --p2p --persistent --verbose)
            [ "$scenario" = parallel ] && opts+=(--parallel --parallel-connections 4)
            [ "$scenario" = one-channel ] && opts+=(--copy-storage-all --suspend)
            say "as $user: virt-rdma migrate -c qemu:///system ${opts[*]} $guest $dest"
            out=$(runuser -u "$user" -- virt-rdma migrate -c qemu:///system "${opts[@]}" "$guest" "$dest" 2>&1); rc=$?
            echo "$out" | tr '\r' '\n' | grep -v '^$' | tail -12
            if [ $rc -ne 0 ]; then
                say "virt-rdmad's log:"; tail -30 /tmp/virt-rdmad.log
                say "libvirtd's log:"; grep -E "error|warning" /var/log/libvirt/libvirtd.log | tail -15
                fail "virt-rdma migrate as $user failed (status $rc)"
            fi
            # --keep-completed: check_migrated_source reads the same job after it
            runuser -u "$user" -- virt-rdma jobinfo -c qemu:///system --completed --keep-completed "$guest" ||
                fail "virt-rdma jobinfo --completed failed"
            if [ "$scenario" = one-channel ]; then
                engine_record_disks 1 $((64 << 20)) ||
                    fail "a's engine did not carry the disk (one disk connection, more than the 64 MiB image sent)"
                disk_sum "$guest" > "$SHARED/disk-sum-$scenario"
            fi ;;
        auto-converge)
            # and XBZRLE: the pages sent again go as deltas against QEMU's cache
            opts=(--live --p2p --persistent --auto-converge --auto-converge-initial 40
                  --auto-converge-increment 20 --bandwidth 4 --compressed --comp-methods xbzrle)
            say "as $user: virt-rdma migrate -c qemu:///system ${opts[*]} $guest $dest"
            runuser -u "$user" -- virt-rdma migrate -c qemu:///system "${opts[@]}" "$guest" "$dest" > /tmp/ac.out 2>&1 &
            local mig=$! throttle= deadline=$((SECONDS + 180))
            wait_data_moved "$guest" 120 || { cat /tmp/ac.out; fail "the migration of $guest never moved data"; }
            check_qemu_auto_converge "$guest"
            until [ -n "$throttle" ]; do
                # a CI run saw QEMU complete without a throttle line: the
                # guest stops dirtying while it verifies its RAM, and QEMU
                # may finish in such a window (or between two polls, once
                # throttled); the parameters above are the firm check
                kill -0 $mig 2>/dev/null || { say "auto-converge: the migration completed before a throttle was seen"; break; }
                [ $SECONDS -ge $deadline ] && { virsh domjobinfo "$guest"; fail "QEMU did not throttle the guest within 180 s"; }
                nap 0.5
                throttle=$(virsh domjobinfo "$guest" 2>/dev/null | sed -n 's/^Auto converge throttle: *\([1-9][0-9]*\).*/\1/p')
            done
            if [ -n "$throttle" ]; then
                virsh domjobinfo "$guest" | grep -E "^(Data processed|Memory bandwidth|Iteration|Auto converge throttle)"
                say "auto-converge: QEMU throttles the guest's CPU by $throttle %; the bandwidth cap is lifted"
                lift_cap "$guest" "$mig" || fail "auto-converge: the migration must go on at full speed"
            fi
            wait $mig; rc=$?
            cat /tmp/ac.out
            [ $rc = 0 ] || fail "virt-rdma migrate --auto-converge as $user failed (status $rc)" ;;
        postcopy-recovery)
            postcopy_recovery ;;
    esac
    check_migrated_source "$guest"
    [ "$scenario" = auto-converge ] && check_compressed_xbzrle "$guest"
    no_denials
    flag "migrated-$scenario"
    wait_flag "verified-b-$scenario" 300
    virsh -q undefine "$guest" || fail "cannot remove the shut-off $guest"
    rm -f "$(disk_img "$guest")"
}

for scenario in "${scenarios[@]}"; do
    guest=g-$scenario
    say "---- scenario $scenario (guest $guest)"
    if [ "$VRM_SANDBOX_HOST" = b ]; then
        on_b "$scenario"
    else
        on_a "$scenario"
    fi
done
say "done"
