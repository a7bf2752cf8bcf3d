#!/usr/bin/python3
# vrm-switch-test.py: the sandbox's switch (vrm-switch) on this machine,
# with this program as its three VMs. What a VM sends is framed as QEMU
# frames it (a 4-byte big-endian length, then the frame). Checked: it
# learns and switches (a broadcast floods, a unicast reaches its port
# only), it survives what no QEMU sends (a runt, a truncated frame, a
# length of 0 or beyond any frame: that port is closed, the others carry
# on), a port that stops reading costs only its own frames (dropped, the
# sender never stalls), and it reports its counters when it ends.
#
# Usage: vrm-switch-test.py PATH-TO-vrm-switch
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

failures = 0


def check(cond, what):
    global failures
    print(("ok: " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        failures += 1


def mac(n):
    return bytes([0x52, 0x54, 0, 0, 0, n])


BCAST = b"\xff" * 6


def frame(dst, src, payload=b"x" * 50):
    return dst + src + b"\x08\x00" + payload


def send(sock, f):
    sock.sendall(struct.pack(">I", len(f)) + f)


def recv_frames(sock, seconds, want=None):
    """Whole frames that arrive within SECONDS (never blocks past it), or
    as soon as WANT of them have."""
    buf = b""
    frames = []
    deadline = time.monotonic() + seconds
    while want is None or len(frames) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([sock], [], [], left)
        if not r:
            break
        data = sock.recv(1 << 16)
        if not data:
            break
        buf += data
        while len(buf) >= 4:
            (n,) = struct.unpack(">I", buf[:4])
            if len(buf) < 4 + n:
                break
            frames.append(buf[4:4 + n])
            buf = buf[4 + n:]
    return frames


def main():
    switch = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o700)
        proc = subprocess.Popen([switch, "--dir", d, "--ports", "a,b,c"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            ready = proc.stdout.readline().decode().strip()
            check(ready == "ready", "the switch says ready")
            for p in "abc":
                st = os.stat(os.path.join(d, "port-%s.sock" % p))
                check(st.st_mode & 0o777 == 0o600, "port-%s.sock is 0600" % p)
            socks = {}
            for p in "abc":
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(10)
                s.connect(os.path.join(d, "port-%s.sock" % p))
                socks[p] = s
            a, b, c = socks["a"], socks["b"], socks["c"]
            # the switch unlinks a port's socket once it has accepted its VM
            deadline = time.monotonic() + 10
            while any(os.path.exists(os.path.join(d, "port-%s.sock" % p)) for p in "abc"):
                check(time.monotonic() < deadline, "the switch accepts its three VMs within 10 s")
                if time.monotonic() >= deadline:
                    return 1
                time.sleep(0.05)

            # learning: a broadcast from each floods to the others
            for n, p in enumerate("abc", 1):
                send(socks[p], frame(BCAST, mac(n)))
            got = {p: recv_frames(socks[p], 5.0, 2) for p in "abc"}
            check(all(len(got[p]) == 2 for p in "abc"),
                  "each broadcast reached the two other ports (%s)" %
                  {p: len(got[p]) for p in "abc"})
            # a unicast reaches its port only
            f = frame(mac(2), mac(1), b"to-b" * 20)
            send(a, f)
            check(recv_frames(b, 5.0, 1) == [f], "a's unicast to b arrived intact on b")
            check(recv_frames(c, 0.3) == [], "c saw nothing of a's unicast to b")

            # garbage that is not QEMU: a runt is dropped, a truncated frame
            # waits for its rest
            send(c, b"\x01\x02\x03")
            f = frame(mac(1), mac(3), b"split" * 30)
            raw = struct.pack(">I", len(f)) + f
            c.sendall(raw[:10])
            time.sleep(0.2)
            c.sendall(raw[10:])
            check(recv_frames(a, 5.0, 1) == [f], "a frame sent in two parts arrived whole (after a runt)")
            # a length no QEMU sends closes that port, and only it
            c.sendall(struct.pack(">I", 1 << 20) + b"junk")
            closed = recv_frames(c, 2.0)
            try:
                c.send(struct.pack(">I", 60) + frame(mac(1), mac(3)))
                late = recv_frames(a, 0.5)
            except OSError:
                late = []
            check(closed == [] and late == [], "port c closed on a 1 MiB frame length, nothing more from it")
            send(a, f2 := frame(mac(2), mac(1), b"after" * 10))
            check(recv_frames(b, 5.0, 1) == [f2], "a and b carry on after c's port closed")

            # b stops reading: a's frames to b fill b's queue and are then
            # dropped; a is never stalled
            big = frame(mac(2), mac(1), b"\0" * 8986)
            start = time.monotonic()
            a.settimeout(10)
            for _ in range(1000):       # 9 MB, beyond the 4 MiB queue
                send(a, big)
            check(time.monotonic() - start < 10, "a sent 9 MB towards a port that does not read, unstalled")
            send(a, f3 := frame(BCAST, mac(1), b"still" * 10))
            time.sleep(0.5)
            n = len(recv_frames(b, 3.0))
            check(0 < n < 1001, "b's queue kept part of it and dropped the rest (%d of 1001 frames)" % n)

            for s in (a, b):
                s.close()
            c.close()
            rc = proc.wait(timeout=10)
            err = proc.stderr.read().decode()
            print(err, end="")
            check(rc == 0, "the switch exits 0 when every port has closed")
            check("frame of 1048576 bytes is not QEMU's" in err, "it names the bad frame length")
            check("port b:" in err and "dropped" in err and
                  " 0 dropped" not in err.split("port b:")[1].splitlines()[0],
                  "b's counters show the drops")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
