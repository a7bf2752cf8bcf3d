# fleet-lib.sh: the fleet's scenarios (tests/e2e/fleet.sh) and its
# benchmark (tests/bench/fleet-bench.sh): three sandbox hosts on the
# emulated switch, host a drives, b and c run what it asks (remote_on HOST
# CMD, e2e-lib.sh).
# Sourced inside a sandbox VM, after nothing else.
. "$(dirname "${BASH_SOURCE[0]}")/e2e-lib.sh"
export PATH=$VRM_BUILD_DIR/tools/cli:$VRM_BUILD_DIR/tests/helper:$PATH
me=$VRM_SANDBOX_HOST

addr_of() { case "$1" in a) echo 198.18.0.1 ;; b) echo 198.18.0.2 ;; c) echo 198.18.0.3 ;; esac; }
dest_of() { echo "qemu+tcp://$(addr_of "$1")/system"; }

# wait_ready HOST: HOST's helper, hook and libvirtd are up
wait_ready() {
    local deadline=$((SECONDS + 240))
    until [ -e "$SHARED/ready-$1" ]; do
        [ -e "$SHARED/failed-$1" ] && fail "host $1 failed while setting up"
        [ $SECONDS -ge $deadline ] && fail "host $1 was not ready within 240 s"
        nap 0.2
    done
}

# arrived GUEST: here, running, its RAM verified here, and its live
# metadata names this host's helper
arrived() {
    check_arrived "$1" && wait_locator "$1" "sandbox-$me"
}

# migrate_start GUEST HOST [--tcp] [VIRSH OPTIONS]: this host's plain
# virsh migration of GUEST to HOST over the per-domain URI (with --tcp:
# libvirt's own transport, no --migrateuri), in the background
migrate_start() {
    local g=$1 h=$2 uri=()
    shift 2
    if [ "${1:-}" = --tcp ]; then
        shift
    else
        uri=(--migrateuri "$(virt-rdma uri "$g")")
    fi
    rm -f "/tmp/mig-$g.rc"
    ( virsh migrate --live --p2p --persistent "$@" "${uri[@]}" \
          "$g" "$(dest_of "$h")" > "/tmp/mig-$g.out" 2>&1
      echo $? > "/tmp/mig-$g.rc" ) &
    echo $! > "/tmp/mig-$g.pid"
}

# migrate_wait GUEST SECONDS: its status; one still running at the
# deadline is shown and aborted, and fails the test
migrate_wait() {
    local g=$1 deadline=$((SECONDS + $2))
    until [ -s "/tmp/mig-$g.rc" ]; do
        if [ $SECONDS -ge $deadline ]; then
            virsh domjobinfo "$g"
            virsh domjobabort "$g"
            fail "the migration of $g did not end within $2 s"
        fi
        nap 0.3
    done
    grep . "/tmp/mig-$g.out" | sed "s/^/  [virsh $g] /"
    return "$(cat "/tmp/mig-$g.rc")"
}

# migrate_refused GUEST HOST: this host's plain virsh migration of GUEST
# to HOST over the per-domain URI must fail (within 120 s): prints its
# error's lines; false if it went through
migrate_refused() {
    local out
    out=$(timeout 120 virsh migrate --live --p2p --persistent --migrateuri "$(virt-rdma uri "$1")" \
              "$1" "$(dest_of "$2")" 2>&1) && { echo "$1 migrated to $2"; return 1; }
    printf '%s\n' "$out" | grep .
    return 0
}

# migrate_from HOST GUEST TO: plain virsh on HOST (b or c) moves GUEST to TO
migrate_from() {
    remote_on "$1" "virsh migrate --live --p2p --persistent --migrateuri \"\$(virt-rdma uri $2)\" $2 $(dest_of "$3")"
}

# left GUEST: GUEST left this host (shut off, still defined) by an RDMA job
left() {
    check_migrated_source "$1" > /dev/null
    virt-rdma jobinfo --completed "$1" | grep -E "^RDMA (job|bytes sent):" | sed "s/^/  [$me $1] /"
    virt-rdma jobinfo --completed "$1" | grep -qE "^RDMA job: +[0-9]+ \(completed\)" ||
        fail "$1's RDMA job on $me did not complete"
}

nothing_left() {
    check_no_leftovers
    remote_on b check_no_leftovers || fail "something was left behind on b"
    remote_on c check_no_leftovers || fail "something was left behind on c"
}

# host_dies: this VM powers off at once, as a host that loses power: no
# service stops, no connection closes cleanly. It reports success first
# (the sandbox counts a host without a status as a failure).
host_dies() {
    echo 0 > "$SHARED/status-$me"
    sync
    poweroff -f
}

# host_setup [CONF LINE...]: this host's helper (its configuration with
# the extra lines), the hook and libvirtd
host_setup() {
    start_virt_rdma --no-helper
    [ $# = 0 ] || write_helper_conf "$@"
    run_helper
    start_libvirt
}
