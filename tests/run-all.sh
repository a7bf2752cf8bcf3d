#!/bin/bash
# run-all.sh: the one command that passes virt-rdma's tests on a fresh
# Debian 12 machine, as root. It installs what is needed, builds, builds
# the Debian packages for Debian 12 and 13 in clean buildd roots (with the
# unit suite, lintian and autopkgtest) and shows that dropping a
# Build-Depends line breaks that build, builds the unit tier again with
# AddressSanitizer and UndefinedBehaviorSanitizer (beside the package
# builds), replays every fuzzer's seeds and regression inputs and runs
# each fuzzer (XML, wire codec, channel state machines, stats record, peer
# and control documents) for a bounded time, then runs the rdma and e2e
# suites (in the Soft-RoCE sandbox; the unit suite ran in the package
# builds) and the compat suite (the e2e scenarios on Debian 13 sandbox
# hosts, a root it makes with mmdebstrap from the Debian archive) within
# what is left of 85 minutes, checks that the translation template
# builds, and ends with a time table and the line `N passed, N failed`.
#
#   --no-install     skip apt-get (the packages are already there)
#   --fuzz-seconds N run each fuzzer N seconds (default 60, what the security
#                    issue asks of CI; longer campaigns run apart:
#                    tests/fuzz/run-fuzz.sh BUILDDIR SECONDS)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
install=1
fuzz_seconds=60
while [ $# -gt 0 ]; do
    case "$1" in
        --no-install) install=0; shift ;;
        --fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
        *) echo "run-all.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done

if [ "$install" = 1 ]; then
    bash tools/install-deps.sh || { echo "run-all.sh: installing packages failed"; echo "0 passed, 1 failed"; exit 1; }
fi

out=${VRM_TEST_DIR:-$top/build-tests}
rm -rf "$out"
mkdir -p "$out"
passed=0
failed=0
step() { echo; echo "==== $* ===="; }
# not_passed WHAT: one failure that is not a meson test, named again at the end
not_passed() { echo "not passed: $*" >> "$out/not-passed"; failed=$((failed + 1)); }

# count_meson DIR: add the results of DIR/meson-logs/testlog.json; its
# tests of a minute or more go into the time table, under the step's line
# (each meson test run overwrites that log, so it is read after each)
count_meson() {
    local log=$1/meson-logs/testlog.json counts
    if [ ! -f "$log" ]; then
        not_passed "the tests of $1 (no $log)"
        return
    fi
    counts=$(python3 - "$log" "$out/not-passed" "$out/why-not-passed" "$out/times-tests" <<'PY'
import json, sys
ok = bad = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    r = json.loads(line)
    # every test of a minute or more goes into the time table
    if r.get("duration", 0) >= 60:
        with open(sys.argv[4], "a") as f:
            print("    %-56s %5d s %s" % (r.get("name"), r["duration"], r.get("result", "")), file=f)
    # A skipped test is not a passed test.
    if r.get("result") == "OK":
        ok += 1
    else:
        bad += 1
        print("  not passed: %s (%s)" % (r.get("name"), r.get("result")), file=sys.stderr)
        with open(sys.argv[2], "a") as f:
            print("not passed: %s (%s)" % (r.get("name"), r.get("result")), file=f)
        # why, next to the summary: the test's lines that say FAIL (with
        # the 4 lines before them, where a failed command printed its
        # error, and the 3 after, the context its fail() prints) or a
        # kernel panic, else the end of its output
        lines = (r.get("stdout") or "").splitlines()
        why = [i for i, l in enumerate(lines)
               if "FAIL" in l or "panic" in l.lower() or "timed out" in l]
        keep = sorted({j for i in why for j in range(max(i - 4, 0), min(i + 4, len(lines)))})
        excerpt = [lines[j] for j in keep][:60] or lines[-20:]
        with open(sys.argv[3], "a") as f:
            print("== why %s failed (excerpt of its output):" % r.get("name"), file=f)
            for l in excerpt:
                print("   " + l[:300], file=f)
print(ok, bad)
PY
)
    passed=$((passed + ${counts% *}))
    failed=$((failed + ${counts#* }))
}

# check NAME COMMAND...: one pass/fail line for a step that is not a meson test.
check() {
    local name=$1; shift
    if "$@"; then
        echo "check passed: $name"; passed=$((passed + 1))
    else
        echo "check FAILED: $name"; not_passed "$name"
    fi
}

# fuzz_pair FUZZER FUZZER: both at once for $fuzz_seconds, then one check
# line each, with its output
fuzz_pair() {
    local f pids=()
    for f in "$@"; do
        bash tests/fuzz/run-fuzz.sh "$out/fuzz" "$fuzz_seconds" "$f" > "$out/fuzz-$f.out" 2>&1 &
        pids+=($!)
    done
    for f in "$@"; do
        check "fuzzing $f for ${fuzz_seconds}s" fuzz_result "${pids[0]}" "$out/fuzz-$f.out"
        pids=("${pids[@]:1}")
    done
}
fuzz_result() { local rc=0; wait "$1" || rc=$?; cat "$2"; return $rc; }

# clean_debs_start SUITE OUTDIR: the packages of SUITE built in a clean
# root (tools/build-debs-clean.sh, with that distribution's lintian and
# autopkgtest), in the background: its output goes to OUTDIR.out, its
# status to OUTDIR.rc; the job's pid in $clean_debs_pid (a child of this
# shell, which a command substitution's would not be)
clean_debs_start() {
    ( DEB_BUILD_OPTIONS="parallel=2" bash tools/build-debs-clean.sh --lintian --autopkgtest \
          "$1" "$2" "$out/clean-roots" > "$2.out" 2>&1
      echo $? > "$2.rc" ) < /dev/null > /dev/null 2>&1 &
    clean_debs_pid=$!
}

# clean_debs_checks PID NAME OUTDIR: waits for clean_debs_start's job PID,
# shows its output, and makes one check line for the build, lintian
# (--pedantic; errors, warnings and info tags not overridden, with their
# reason, in debian/*.lintian-overrides, fail), autopkgtest and compiler
# warnings in the build log. Fails when no packages were built.
clean_debs_checks() {
    local pid=$1 name=$2 dir=$3 rc
    wait "$pid"
    cat "$dir.out"
    rc=$(cat "$dir.rc" 2>/dev/null || echo 1)
    if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
        echo "check FAILED: $name packages build in a clean root (log: $dir/build.log)"
        not_passed "$name packages build in a clean root"
        return 1
    fi
    echo "check passed: $name packages build in a clean root (apt-get build-dep, dpkg-buildpackage, unit suite inside)"
    passed=$((passed + 1))
    check "$name lintian clean (errors, warnings, info)" grep -qx passed "$dir/lintian.status"
    check "$name autopkgtest (debian/tests) passes" grep -qx passed "$dir/autopkgtest.status"
    check "$name package build without compiler warnings" \
        bash -c '! grep -E "^[^ ]+:[0-9]+:[0-9]+: warning:" "$1"' _ "$dir/build.log"
}

# timed NAME START: one line of the time table printed before the summary
# (CI shows only the end of the log)
# and, under it, the step's tests of a minute or more (count_meson)
timed() {
    printf '  %-58s %5d s\n' "$1" $((SECONDS - $2)) >> "$out/times"
    if [ -f "$out/times-tests" ]; then
        cat "$out/times-tests" >> "$out/times"
        rm -f "$out/times-tests"
    fi
}

# CI stops a run at 90 minutes and then prints nothing of it. The sandbox
# suites get what is left of 85 minutes from the script's start, so that a
# run on a slow day still ends with its summary and the time table, and
# says what did not finish.
budget_end=$((85 * 60))

# The unit tier under AddressSanitizer and UndefinedBehaviorSanitizer,
# built and run in the background beside the package builds, which leave
# the cores idle while they wait on the archive and on dpkg (CI time):
# sanitizer_start, then sanitizer_checks counts it. Its tests get three
# times their timeouts: the sanitizers and the builds beside them slow them.
sanitizer_start() {
    sanitizer_started=$SECONDS
    ( if meson setup "$out/asan" -Dsandbox_tests=false -Db_sanitize=address,undefined -Db_lundef=false &&
         ninja -C "$out/asan"; then
          meson test -C "$out/asan" --suite unit --print-errorlogs --timeout-multiplier 3
          echo built > "$out/asan.status"
      else
          echo "run-all.sh: the sanitizer build failed"
          echo failed > "$out/asan.status"
      fi ) < /dev/null > "$out/asan.out" 2>&1 &
    sanitizer_pid=$!
}
sanitizer_checks() {
    step "unit suite under AddressSanitizer and UndefinedBehaviorSanitizer"
    wait "$sanitizer_pid"
    cat "$out/asan.out"
    if grep -qx built "$out/asan.status" 2>/dev/null; then
        count_meson "$out/asan"
    else
        not_passed "the sanitizer build"
    fi
    timed "unit suite under ASan and UBSan (build and run, beside the packages)" "$sanitizer_started"
}

# Every fuzzer's seeds and regression inputs once, then each fuzzer for
# $fuzz_seconds, two at a time (each is one process; the machine has two
# cores), each for the whole time
fuzzing_step() {
    local start=$SECONDS
    step "fuzzing (${fuzz_seconds}s each, libFuzzer with ASan+UBSan)"
    if CC=clang meson setup "$out/fuzz" -Dsandbox_tests=false -Dfuzzing=true \
           -Db_sanitize=address,undefined -Db_lundef=false &&
       ninja -C "$out/fuzz"; then
        meson test -C "$out/fuzz" --suite fuzz --print-errorlogs
        count_meson "$out/fuzz"
        fuzz_pair vrmxmlfuzz vrmwirefuzz
        fuzz_pair vrmchannelfuzz vrmstatsfuzz
        fuzz_pair vrmpeerfuzz vrmcontrolfuzz
    else
        echo "run-all.sh: the fuzzing build failed"
        not_passed "the fuzzing build"
    fi
    timed "fuzzing (build, seeds, six fuzzers for ${fuzz_seconds} s)" "$start"
}
# (only the sanitizer and fuzzing builds read them)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# suites_step WHAT MESON-TEST-ARGUMENTS...: meson test on the sandbox
# build within the budget; a run the budget stopped is a failure that says so
suites_step() {
    local what=$1 start=$SECONDS rc=0 left=$((budget_end - SECONDS))
    shift
    if [ "$left" -lt 120 ]; then
        not_passed "$what: not run, CI's budget (85 minutes in all) was spent"
        return
    fi
    timeout --signal=TERM "$left" meson test -C "$out/build" --print-errorlogs "$@" || rc=$?
    [ "$rc" = 124 ] && not_passed "$what: stopped at CI's budget (85 minutes in all); the tests not listed above did not run"
    count_meson "$out/build"
    timed "$what" "$start"
}

step "build (warnings are errors)"
if meson setup "$out/build" -Dsandbox_tests=true && ninja -C "$out/build"; then
    # The compat suite's Debian 13 root (mmdebstrap from the archive, then
    # virt-rdma built inside it) is made while the packages build: much of
    # it waits on the archive, and no sandbox runs yet (CI time). Its test
    # (debian13-root) finds it made and checks it; a failure here is that
    # test's failure, with the log.
    compat_root_start=$SECONDS
    VRM_SOURCE_DIR=$top VRM_BUILD_DIR=$out/build LC_ALL=C.UTF-8 \
        bash tests/compat/compat-test.sh 13 root > "$out/compat-root.log" 2>&1 &
    compat_root_pid=$!
    sanitizer_start
    # Before the suites: the packages, built as a distribution's buildd
    # builds them (tools/build-debs-clean.sh: a clean buildd root made with
    # mmdebstrap, apt-get build-dep from debian/control alone,
    # dpkg-buildpackage with the unit suite), checked by that
    # distribution's lintian and autopkgtest. The stock-host e2e scenario
    # installs the Debian 12 ones inside the sandbox ($out/build/debs).
    step "Debian packages from clean Debian 12 and 13 roots: build, lintian, autopkgtest"
    pkg_start=$SECONDS
    # Debian 13's build runs beside Debian 12's and its negative twin
    # (their own roots and apt caches; much of each waits on the archive
    # and on dpkg): CI time. The twin shares Debian 12's apt cache, so it
    # comes after that build.
    clean_debs_start trixie "$out/debs-13"
    pkg13_pid=$clean_debs_pid
    clean_debs_start bookworm "$out/build/debs"
    pkg12_pid=$clean_debs_pid
    clean_debs_checks "$pkg12_pid" "Debian 12" "$out/build/debs" &&
        check "packages hold what they should; libvirtrdma-dev builds a program" \
            bash tests/packaging/deb-check.sh "$out/build/debs"
    check "the negative twin: a clean Debian 12 build without libgnutls28-dev fails" \
        bash tests/packaging/clean-build-negative.sh bookworm "$out/clean-roots"
    clean_debs_checks "$pkg13_pid" "Debian 13" "$out/debs-13"
    timed "packages (Debian 12 and 13), lintian, autopkgtest" "$pkg_start"
    wait "$compat_root_pid"
    echo "the Debian 13 root, beside the packages: status $?, $((SECONDS - compat_root_start)) s"
    timed "the compat suite's Debian 13 root (beside the packages)" "$compat_root_start"
    # the steps that need no sandbox first: the sandbox suites take most
    # of the run, and on a slow day the budget stops them, not these
    sanitizer_checks
    [ -f tests/fuzz/run-fuzz.sh ] && fuzzing_step
    # The unit suite ran in both clean package builds (Debian 12's is this
    # host's) and under the sanitizers; of it, only the emulated switch's
    # test is not there (it is built with the sandbox): CI time
    step "the emulated switch's unit test, the rdma and e2e suites"
    suites_step "the emulated switch's unit test" vrm-switch
    suites_step "rdma and e2e suites" --no-suite compat --no-suite unit
    step "compat suite: Debian 13 sandbox hosts"
    suites_step "compat suite (Debian 13 sandbox hosts)" --suite compat
    step "translation template"
    check "po template builds" ninja -C "$out/build" virt-rdma-pot
else
    echo "run-all.sh: the build failed"
    not_passed "the build"
    sanitizer_start
    sanitizer_checks
    [ -f tests/fuzz/run-fuzz.sh ] && fuzzing_step
fi

echo
# the time table, then what failed, next to the summary (a CI page shows
# only the end of the log)
echo "times (the whole run: $SECONDS s):"
cat "$out/times" 2>/dev/null
[ -s "$out/why-not-passed" ] && cat "$out/why-not-passed"
[ -s "$out/not-passed" ] && cat "$out/not-passed"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
