#!/usr/bin/env python3
"""Paced 802.1Qbb PFC PAUSE frames out of one interface (run inside a host namespace), the way
a NIC stuck in a pause storm keeps pausing its switch port.

  pfc_storm.py --iface eth0 --priority 3 --quanta 65535 --interval-ms 5 --seconds 20
  pfc_storm.py ... --on-ms 100 --off-ms 400     (in stretches: a receiver that keeps stalling)

Frame: dst 01:80:c2:00:00:01, EtherType 0x8808, opcode 0x0101, class-enable vector with the
priority's bit, eight 16-bit quanta (only the enabled class's is non-zero), padded to 60 bytes.
Standard library only (AF_PACKET). Pacing is by absolute deadlines. Prints the number of frames
sent when it ends (also on SIGTERM).
"""
import argparse
import signal
import socket
import struct
import sys
import time


def frame(src_mac, priority, quanta):
    dst = bytes.fromhex("0180c2000001")
    times = [0] * 8
    times[priority] = quanta
    body = struct.pack("!HH8H", 0x0101, 1 << priority, *times)
    f = dst + src_mac + struct.pack("!H", 0x8808) + body
    return f + b"\0" * (60 - len(f))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--priority", type=int, default=3, choices=range(8))
    ap.add_argument("--quanta", type=int, default=0xFFFF)
    ap.add_argument("--interval-ms", type=float, default=5)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--on-ms", type=float, default=0, help="pause for this long, then")
    ap.add_argument("--off-ms", type=float, default=0, help="stay quiet this long (0: never)")
    ap.add_argument("--ready", help="create this file once the first frame is sent")
    a = ap.parse_args()
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((a.iface, 0))
    with open(f"/sys/class/net/{a.iface}/address") as m:
        src = bytes.fromhex(m.read().strip().replace(":", ""))
    f = frame(src, a.priority, a.quanta)
    sent = 0

    def done(*_):
        print(f"sent {sent} PFC PAUSE frames", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, done)
    period = a.interval_ms / 1000.0
    n = int(a.seconds / period)
    t0 = time.monotonic()
    cycle = (a.on_ms + a.off_ms) / 1000.0
    for i in range(n):
        at = t0 + i * period
        if a.off_ms > 0 and (at - t0) % cycle >= a.on_ms / 1000.0:
            continue
        delay = at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        s.send(f)
        sent += 1
        if sent == 1 and a.ready:
            open(a.ready, "w").close()
    done()


if __name__ == "__main__":
    main()
