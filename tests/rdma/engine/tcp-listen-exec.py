#!/usr/bin/env python3
# tcp-listen-exec.py PORTFILE PROGRAM ARGS...: run PROGRAM with a TCP
# listener on 127.0.0.1 (a port the kernel chose, written to PORTFILE) as
# descriptor 8, the way virt-rdmad hands the source engine its listener
# in the transparent mode (engine-pair.sh, engine-cases.sh).
import os
import socket
import sys

s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
with open(sys.argv[1], "w") as f:
    f.write(str(s.getsockname()[1]))
os.dup2(s.fileno(), 8)
os.execv(sys.argv[2], sys.argv[2:])
