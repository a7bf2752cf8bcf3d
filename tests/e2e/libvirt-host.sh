#!/bin/bash
# libvirt-host.sh start: make this sandbox VM a libvirt host: a private
# configuration, a libvirtd listening on the VM's address (TCP, no auth:
# the emulated wire reaches only the other sandbox VM) and a distinct host
# UUID. Run inside a sandbox VM only: it writes /etc (a tmpfs overlay there).
set -euo pipefail

[ -n "${VRM_SANDBOX_HOST:-}" ] || { echo "libvirt-host.sh: run inside the sandbox" >&2; exit 2; }

# libvirtd looks its built-in user up before reading qemu.conf; Debian
# creates it in libvirt-daemon-system, which we do not install.
getent group libvirt-qemu >/dev/null || echo "libvirt-qemu:x:64055:" >> /etc/group
getent group libvirt >/dev/null || echo "libvirt:x:64056:" >> /etc/group
getent passwd libvirt-qemu >/dev/null ||
    echo "libvirt-qemu:x:64055:64055:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin" >> /etc/passwd

mkdir -p /etc/libvirt /var/lib/libvirt/qemu /var/cache/libvirt/qemu /var/log/libvirt/qemu /run/libvirt
# one per host (a to d are hex digits): libvirt refuses a migration
# between two hosts of the same UUID
uuid=5f0b6d2e-7a1c-4c3e-9d01-00000000000$VRM_SANDBOX_HOST
# VRM_LIBVIRT_LOG_FILTERS / VRM_LIBVIRT_LOG_LEVEL: more of libvirtd's log
# (the benchmark's timelines use "1:qemu.qemu_monitor_json").
filters=
[ -n "${VRM_LIBVIRT_LOG_FILTERS:-}" ] && filters="log_filters = \"$VRM_LIBVIRT_LOG_FILTERS 3:*\""
cat > /etc/libvirt/libvirtd.conf <<CONF
listen_tls = 0
listen_tcp = 1
auth_tcp = "none"
listen_addr = "$VRM_SELF_ADDR"
host_uuid = "$uuid"
unix_sock_group = "root"
log_outputs = "${VRM_LIBVIRT_LOG_LEVEL:-3}:file:/var/log/libvirt/libvirtd.log"
$filters
CONF
cat > /etc/libvirt/qemu.conf <<CONF
user = "root"
group = "root"
security_driver = "none"
namespaces = [ ]
dynamic_ownership = 0
stdio_handler = "file"
remember_owner = 0
migration_address = "$VRM_SELF_ADDR"
CONF

libvirtd --listen --daemon --pid-file /run/libvirtd.pid
for _ in $(seq 600); do
    if virsh -c qemu:///system version >/dev/null 2>&1; then
        # with cgroup v2 (e2e-lib.sh's use_cgroups), the daemon in a
        # cgroup of its own, as systemd puts libvirtd.service
        if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
            mkdir -p /sys/fs/cgroup/system.slice/libvirtd.service &&
                cat /run/libvirtd.pid > /sys/fs/cgroup/system.slice/libvirtd.service/cgroup.procs ||
                { echo "libvirt-host.sh: cannot move libvirtd into its cgroup" >&2; exit 1; }
        fi
        exit 0
    fi
    sleep 0.1
done
echo "libvirt-host.sh: libvirtd did not answer within 60 s" >&2
tail -20 /var/log/libvirt/libvirtd.log >&2 || true
exit 1
