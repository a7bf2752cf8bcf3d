#!/bin/bash
# fleet-ring.sh PINGPONG: each sandbox host serves one pingpong and is the
# client of the next host's (a->b->c->a with three hosts), all at once, so
# every port of the emulated switch carries RDMA both ways at the same
# time. Passes only if this host's server and its client both verified
# their payloads.
set -u
pp=$1
host=${VRM_SANDBOX_HOST:?run inside vrm-sandbox}
n=${VRM_SANDBOX_HOSTS:?}
names=(a b c d)
for i in $(seq 0 $((n - 1))); do [ "${names[$i]}" = "$host" ] && break; done
next=$(( (i + 1) % n ))
next_addr=198.18.0.$((next + 1))
cd /tmp || exit 1
"$pp" --server "$VRM_SELF_ADDR" --timeout 120 > "pp-server.out" 2>&1 &
server=$!
"$pp" --connect "$next_addr" --timeout 120 > "pp-client.out" 2>&1
client_rc=$?
wait "$server"
server_rc=$?
sed 's/^/server: /' pp-server.out
sed "s/^/client of sandbox-${names[$next]}: /" pp-client.out
[ "$server_rc" = 0 ] || { echo "fleet-ring: the server on sandbox-$host failed ($server_rc)"; exit 1; }
[ "$client_rc" = 0 ] || { echo "fleet-ring: the client of sandbox-${names[$next]} failed ($client_rc)"; exit 1; }
echo "fleet-ring: sandbox-$host served and was served"
