#!/usr/bin/env python3
"""One direction of a testbed cable through user space, impaired: what netem would do, for
kernels without sch_netem (`weft testbed fault … loss|reorder`). Run in the wires namespace on
a middle veth whose tc redirect was removed: frames arriving on --in leave by --out, each lost
with probability --loss-percent, each held --delay-ms.

  wire_impair.py --in w3a --out w3b --loss-percent 20 --seed 7
  wire_impair.py --in w3a --out w3b --delay-ms 20

Standard library only (AF_PACKET). Prints what it forwarded and dropped on SIGTERM.
"""
import argparse
import collections
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True)
    ap.add_argument("--out", dest="dst", required=True)
    ap.add_argument("--loss-percent", type=float, default=0.0)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    rx.bind((a.src, 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((a.dst, 0))
    held = collections.deque()
    delay = a.delay_ms / 1000.0
    stats = {"forwarded": 0, "dropped": 0}

    def done(*_):
        print(f"forwarded {stats['forwarded']} dropped {stats['dropped']}", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, done)
    signal.signal(signal.SIGINT, done)
    while True:
        timeout = None
        if held:
            timeout = max(0.0, held[0][0] - time.monotonic())
        r, _, _ = select.select([rx], [], [], timeout)
        now = time.monotonic()
        if r:
            # Drain what arrived.
            while True:
                try:
                    frame, addr = rx.recvfrom(65535, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                if a.loss_percent > 0 and rng.random() * 100.0 < a.loss_percent:
                    stats["dropped"] += 1
                    continue
                held.append((now + delay, frame))
        while held and held[0][0] <= time.monotonic():
            _, frame = held.popleft()
            try:
                tx.send(frame)
                stats["forwarded"] += 1
            except OSError:
                stats["dropped"] += 1


if __name__ == "__main__":
    main()
