#!/bin/bash
# Stage 2 of the sandbox VM: runs on the host's root (read-only 9p under a
# tmpfs overlay). Sets up a private /run, /tmp and /var, the NIC or a dummy
# interface, the rxe device, then runs the command the host left in the
# shared directory and writes its output and exit status back there.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

param() {
    local a
    for a in $(</proc/cmdline); do
        case "$a" in "vrm.$1="*) echo "${a#vrm.$1=}"; return 0 ;; esac
    done
    return 1
}

host=$(param host)
shared=$(param shared)
hosts=$(param hosts)
console=/dev/ttyS0

say() { echo "vrm-sandbox[$host]: $*" > "$console"; }
die() {
    say "$*"
    [ -d "$shared" ] && echo "sandbox set-up failed on host $host: $*" > "$shared/setup-error-$host"
    sync
    poweroff -f
}

# /tmp and /var/tmp stay the overlay's: a build tree may live there (writes
# still go to the overlay's tmpfs). /run starts empty, as on a booted host.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
mount -t debugfs none /sys/kernel/debug 2>/dev/null

# Another distribution's root: this machine's paths that the commands use
# (source and build trees), read-only at their own paths.
bind=$(param bind)
if [ -n "$bind" ]; then
    for p in ${bind//,/ }; do
        if [ -d "/mnt/vrm-machine$p" ]; then
            mkdir -p "$p" || die "cannot create the mount point $p"
        else
            mkdir -p "${p%/*}" && { [ -e "$p" ] || : > "$p"; } || die "cannot create the mount point $p"
        fi
        mount --bind "/mnt/vrm-machine$p" "$p" || die "cannot bind the machine's $p"
    done
fi

# The shared directory: the only host path the VM may write to.
modprobe 9pnet_virtio 2>/dev/null
mkdir -p "$shared"
mount -t 9p -o trans=virtio,version=9p2000.L,rw shared "$shared" ||
    die "cannot mount the shared directory"

hostname "sandbox-$host"
ip link set lo up
# Names resolve locally: the VM has no route to the machine's DNS server,
# and libvirt looks its host name up on every migration.
{
    echo '127.0.0.1 localhost'
    i=0
    for h in a b c d; do
        i=$((i + 1))
        # every host of this run (two at least: the one-host mode has always
        # known sandbox-b too)
        [ "$i" -le 2 ] || [ "$i" -le "$hosts" ] || break
        echo "198.18.0.$i sandbox-$h"
    done
} > /etc/hosts
rm -f /etc/resolv.conf && : > /etc/resolv.conf

self=$(param addr)
modprobe rdma_rxe || die "cannot load rdma_rxe"
modprobe rdma_ucm || die "cannot load rdma_ucm"
if [ "$hosts" = 1 ]; then
    ip link add vrm0 type dummy || die "cannot create the dummy interface"
    netdev=vrm0
else
    modprobe virtio_net || die "cannot load virtio_net"
    netdev=
    for i in $(seq 50); do
        for n in /sys/class/net/*; do
            n=${n##*/}
            [ "$n" = lo ] && continue
            netdev=$n
        done
        [ -n "$netdev" ] && break
        sleep 0.1
    done
    [ -n "$netdev" ] || die "the VM has no NIC"
fi
# RoCE MTU 4096 on the emulated wire; the one-host loopback path of rxe
# stalls with it, so the dummy interface keeps the default (RoCE MTU 1024).
[ "$hosts" = 1 ] || ip link set "$netdev" mtu 9000 || die "cannot set the MTU of $netdev"
ip addr add "$self/24" dev "$netdev" || die "cannot set address $self"
ip link set "$netdev" up || die "cannot bring $netdev up"
rdma link add rxe0 type rxe netdev "$netdev" || die "cannot create rxe0"

for i in $(seq 100); do
    grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
    sleep 0.1
done
grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state ||
    die "rxe0 port 1 never became ACTIVE"

# The host-side limit does not apply inside; tests that want a small
# memlock limit lower it themselves.
ulimit -l unlimited
ulimit -c 0

cd "$(param cwd)" 2>/dev/null || cd /
export HOME=/root
export VRM_SANDBOX_HOST=$host
export VRM_SELF_ADDR=$self
export VRM_PEER_ADDR=$(param peer)
export VRM_SANDBOX_HOSTS=$hosts
export VRM_RDMA_DEVICE=rxe0
export VRM_SANDBOX_NETDEV=$netdev
export VRM_SANDBOX_SHARED=$shared
say "ready: rxe0 on $netdev $self"
echo ready > "$shared/ready-$host"

bash "$shared/cmd-$host.sh" > "$shared/out-$host.log" 2>&1 < /dev/null
echo $? > "$shared/status-$host"
sync
poweroff -f
