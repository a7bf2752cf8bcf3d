#!/bin/bash
# fleet.sh: three hosts on one emulated switch (vrm-sandbox --hosts 3), each
# with its helper, libvirtd and the hook; guests of 32 MiB that keep
# dirtying their RAM, moved with plain virsh and the per-domain URI
# (transparent mode has not landed; issue 32). Host a drives; b and c run
# what a asks (on HOST CMD). Every guest proves its whole RAM on the host it
# lands on, its live metadata names that host's helper, and no host keeps
# an engine, a per-domain directory or an open job record after a step.
#
#   1. evacuate a: g1 and g2 to b, g3 and g4 to c (two destinations),
#      under a pinned-memory budget on a that fits three jobs: g1 to g3 go
#      at once; g4, asked while they run, is refused with one line naming
#      the budget (the policy: refuse, never over-commit) and keeps running
#      on a; it goes as soon as the three have ended
#   2. rebalance and chain: g1 (a->b in step 1) goes on b->c->a, home; its
#      live metadata names the host it runs on after every hop
#   3. c's helper stopped in the middle of an evacuation: g1's job a->b
#      goes on and completes over RDMA; g2's b->c is refused with one line
#      (fallback = refuse) and g2 keeps running on b
#   4. host b's VM dies while it receives g1 again (it powers itself off):
#      g1 keeps running on a (its memory verifies), a's job records why it
#      failed, and a's helper carries g1 to c right after
set -u
. "$(dirname "$0")/fleet-lib.sh"

if [ "$me" != a ]; then
    host_setup
    flag "ready-$me"
    serve_remote
    say "done"
    exit 0
fi

# ---- host a drives ----------------------------------------------------------
# room for three jobs' allowances (78741504 bytes each: nine channels'
# rings) and not four
host_setup "[limits]" "max-pinned-bytes=250M"
# 32 MiB each, 1 MiB dirtied all the time; they start at once
for g in g1 g2 g3 g4; do start_rdma_guest "$g" 32 "dirty_kb=1024"; done
for g in g1 g2 g3 g4; do wait_filled "$g"; wait_locator "$g" sandbox-a; done
wait_ready b
wait_ready c

# 1. evacuate a: three jobs at once, to two destinations, held (64 KiB/s,
#    hold_migration) until the fourth has been refused
say "1. evacuating a: g1 g2 -> b, g3 g4 -> c (plain virsh, per-domain URI), a budget of three jobs"
start=$SECONDS
migrate_start g1 b --bandwidth 1
migrate_start g2 b --bandwidth 1
migrate_start g3 c --bandwidth 1
hold_migrations g1 g2 g3 || fail "the migrations of g1, g2 and g3 were not all held"
say "g1, g2 and g3's jobs hold a's budget (their migrations capped at 64 KiB/s)"
out=$(migrate_refused g4 c) || fail "g4 migrated beyond a's budget of three jobs"
say "g4 -> c while three jobs hold a's budget: $out"
[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "the budget refusal is not one line"
grep -qE "pinned|budget" <<<"$out" || fail "the refusal does not name the pinned-memory budget"
[ "$(virsh domstate g4)" = running ] || fail "g4 is not running on a after the refusal"
virt-rdma capabilities | grep -i "pinned" | sed 's/^/  [a] /'
for g in g1 g2 g3; do lift_cap "$g" "$(cat "/tmp/mig-$g.pid")" || fail "cannot lift the cap of $g"; done
for g in g1 g2 g3; do
    migrate_wait "$g" 400 || fail "the evacuation of $g failed"
done
migrate_start g4 c
migrate_wait g4 300 || fail "g4 did not go once the budget had room"
say "a drained in $((SECONDS - start)) s"
for g in g1 g2 g3 g4; do left "$g"; done
remote_on b "arrived g1 && arrived g2" || fail "g1 and g2 did not arrive on b intact"
remote_on c "arrived g3 && arrived g4" || fail "g3 and g4 did not arrive on c intact"
nothing_left

# 2. rebalance and chain: g1 b -> c -> a
say "2. chaining g1 a -> b (step 1) -> c -> a"
timed migrate_from b g1 c || fail "g1 b->c failed"
remote_on c "arrived g1" || fail "g1 did not arrive on c intact"
remote_on b "left g1" || fail "g1 did not leave b by an RDMA job"
timed migrate_from c g1 a || fail "g1 c->a failed"
arrived g1
remote_on c "left g1" || fail "g1 did not leave c by an RDMA job"
nothing_left

# 3. c's helper stops while g1 goes a -> b; b then asks to move g2 to c
say "3. c's helper stopped in the middle of an evacuation"
migrate_start g1 b --bandwidth 1
hold_migration g1 || fail "g1's migration to b did not start"
remote_on c stop_helper || fail "cannot stop c's helper"
out=$(remote_on b "migrate_refused g2 c") || fail "g2 migrated to c with c's helper down"
out=${out#  \[b\] }
say "g2 b -> c with c's helper down: $out"
[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "the refusal is not one line"
grep -qF "the virt-rdma helper (virt-rdmad) is not running on this host" <<<"$out" ||
    fail "the refusal does not say that c's helper is down"
remote_on b "check_verifies g2 \$(verify_count g2)" || fail "g2 does not run on b after the refusal"
lift_cap g1 "$(cat /tmp/mig-g1.pid)" || fail "cannot lift the cap of g1"
migrate_wait g1 300 || fail "g1's job to b failed while c's helper was down"
left g1
remote_on b "arrived g1" || fail "g1 did not arrive on b intact"
remote_on c run_helper || fail "c's helper did not come back"
nothing_left

# 4. b's VM dies while it receives: g1 comes back from b first, then goes
#    again and b powers off in the middle
say "4. host b dies while it receives"
timed migrate_from b g1 a || fail "g1 b->a failed"
arrived g1
migrate_start g1 b --bandwidth 1
hold_migration g1 || fail "g1's migration to b did not start"
remote_nowait b host_dies
migrate_wait g1 240 && fail "g1's migration to a host that died succeeded"
[ "$(virsh domstate g1)" = running ] || fail "g1 is '$(virsh domstate --reason g1)' on a after b died, not running"
check_verifies g1 "$(verify_count g1)"
info=$(virt-rdma jobinfo --completed g1)
grep -E "^RDMA (job|error)" <<<"$info" | sed 's/^/  [a g1] /'
grep -qE "^RDMA job: +[0-9]+ \((failed|cancelled|unknown)\)" <<<"$info" || fail "a's job of g1 does not record the failure: $info"
check_no_leftovers
migrate_start g1 c
migrate_wait g1 300 || fail "a's helper did not carry g1 to c after b died"
left g1
remote_on c "arrived g1" || fail "g1 did not arrive on c intact"
check_no_leftovers
remote_on c check_no_leftovers || fail "something was left behind on c"

remote_stop c
say "done"
