#!/usr/bin/python3
"""unix-tunnel.py: a stand-in for the two virt-rdma engines, over TCP.

    unix-tunnel.py source PATH PEER:PORT USER   listen on the UNIX socket PATH
                                                 (bound as root, then run as
                                                 USER); each connection is
                                                 carried to PEER:PORT
    unix-tunnel.py destination ADDR:PORT PATH USER
                                                 accept on ADDR:PORT as USER;
                                                 each connection is carried
                                                 to the UNIX socket PATH

Used by tests/e2e/stock-host.sh to prove, without the engines, that a
confined QEMU running as libvirt-qemu can create and connect to its
migration socket under /run/virt-rdma/qemu/<uuid>/. Each direction of each
connection is copied until EOF; the number of connections is printed to
standard output when the process gets SIGTERM. Every connect has a deadline.
"""
import os
import pwd
import signal
import socket
import sys
import threading

count = 0


def drop_to(user):
    pw = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)


def pump(src, dst, name):
    moved = 0
    why = "EOF"
    try:
        while True:
            data = src.recv(1 << 20)
            if not data:
                break
            dst.sendall(data)
            moved += len(data)
    except OSError as e:
        why = str(e)
    print("unix-tunnel: %s: %d bytes, %s" % (name, moved, why), flush=True)
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def carry(conn, other, n):
    t = threading.Thread(target=pump, args=(other, conn, "connection %d back" % n),
                         daemon=True)
    t.start()
    pump(conn, other, "connection %d forth" % n)
    t.join()
    conn.close()
    other.close()


def on_term(*_):
    print("unix-tunnel: %d connection(s)" % count, flush=True)
    os._exit(0)


def main():
    global count
    signal.signal(signal.SIGTERM, on_term)
    mode = sys.argv[1]
    if mode == "source":
        path, peer, user = sys.argv[2], sys.argv[3], sys.argv[4]
        host, port = peer.rsplit(":", 1)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        os.chmod(path, 0o666)
        srv.listen(16)
        drop_to(user)

        def connect():
            s = socket.create_connection((host, int(port)), timeout=30)
            s.settimeout(None)
            return s
    else:
        addr, path, user = sys.argv[2], sys.argv[3], sys.argv[4]
        host, port = addr.rsplit(":", 1)
        drop_to(user)
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind((host, int(port)))
        srv.listen(16)

        def connect():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            s.connect(path)
            s.settimeout(None)
            return s
    print("unix-tunnel: %s ready" % mode, flush=True)
    # The k-th connection on one side becomes the k-th on the other: QEMU
    # takes the first one as the main stream. So connect in accept order,
    # before accepting the next.
    while True:
        conn, _ = srv.accept()
        conn.settimeout(None)
        count += 1
        try:
            other = connect()
        except OSError as e:
            print("unix-tunnel: connection %d: cannot connect: %s" % (count, e),
                  file=sys.stderr, flush=True)
            conn.close()
            continue
        threading.Thread(target=carry, args=(conn, other, count), daemon=True).start()


if __name__ == "__main__":
    main()
