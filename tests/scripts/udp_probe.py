#!/usr/bin/env python3
"""Paced UDP probes for Weft's testbed scenarios (run inside a host namespace).

  udp_probe.py recv --port 5000 --seconds 8 --out r.json
      counts packets, sequence gaps, the largest gap between arrivals, and CE-marked packets
  udp_probe.py send --dst 10.0.0.18 --port 5000 --pps 1000 --seconds 5 [--flows 64] [--tos 2] [--connect]
      sends sequence-numbered packets at a steady pace, rotating over --flows source ports

Standard library only. Pacing is by absolute deadlines, so a late wakeup does not shift the
rest of the stream.
"""
import argparse
import json
import socket
import struct
import time

HDR = struct.Struct("!QQ")  # sequence, send time (ns since the epoch: one clock for all hosts)


def recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.2)
    if a.ready:
        # Bound: packets from now on are counted (the sender waits for this file).
        open(a.ready, "w").close()
    end = time.monotonic() + a.seconds
    arrivals = []
    seqs = set()
    sent_at = {}
    ce = 0
    latency_us = []
    while time.monotonic() < end:
        try:
            data, anc, _flags, _addr = s.recvmsg(2048, socket.CMSG_SPACE(1))
        except socket.timeout:
            continue
        now = time.monotonic_ns()
        if len(data) < HDR.size:
            continue
        seq, sent = HDR.unpack_from(data)
        sent_at[seq] = sent
        # One-way latency on the one clock all namespaces share.
        latency_us.append((time.time_ns() - sent) / 1e3)
        for level, typ, val in anc:
            if level == socket.IPPROTO_IP and typ == socket.IP_TOS and val and (val[0] & 3) == 3:
                ce += 1
        seqs.add(seq)
        arrivals.append(now)
    gaps = [b - a_ for a_, b in zip(arrivals, arrivals[1:])]
    # The loss window on the sender's clock: between the last packet that arrived before a run
    # of lost ones and the first that arrived after it. Unlike arrival gaps, a sender or
    # receiver that was merely scheduled late does not count.
    order = sorted(sent_at)
    outage = (0, None)
    runs = []
    for x, y in zip(order, order[1:]):
        if y - x > 1:
            runs.append({"after_seq": x, "lost": y - x - 1, "from_unix_ms": sent_at[x] / 1e6,
                         "ms": (sent_at[y] - sent_at[x]) / 1e6})
            if sent_at[y] - sent_at[x] > outage[0]:
                outage = (sent_at[y] - sent_at[x], sent_at[x])
    out = {
        "received": len(arrivals),
        "unique": len(seqs),
        "max_seq": max(seqs) if seqs else -1,
        "lost": (max(seqs) + 1 - len(seqs)) if seqs else 0,
        "max_gap_ms": (max(gaps) / 1e6) if gaps else None,
        "ce_marked": ce,
        "outage_ms": outage[0] / 1e6,
        "outage_from_unix_ms": (outage[1] / 1e6) if outage[1] is not None else None,
        "loss_runs": runs[:100],
        "latency_us": {
            "min": min(latency_us) if latency_us else None,
            "p50": sorted(latency_us)[len(latency_us) // 2] if latency_us else None,
            "max": max(latency_us) if latency_us else None,
        },
    }
    with open(a.out, "w") as f:
        json.dump(out, f)


def send(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if a.tos:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, a.tos)
    socks = [s]
    for i in range(1, a.flows):
        x = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if a.tos:
            x.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, a.tos)
        socks.append(x)
    if a.connect:
        # Connected sockets: Linux numbers each one's IPv4 ids (unconnected DF packets get 0),
        # so every packet of a flow has its own id (telemetry joins a packet's hops by it).
        for x in socks:
            x.connect((a.dst, a.port))
    pad = b"\0" * max(0, a.size - HDR.size)
    n = int(a.pps * a.seconds)
    period = 1.0 / a.pps
    t0 = time.monotonic()
    for seq in range(n):
        target = t0 + seq * period
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        x = socks[seq % len(socks)]
        data = HDR.pack(seq, time.time_ns()) + pad
        try:
            if a.connect:
                x.send(data)
            else:
                x.sendto(data, (a.dst, a.port))
        except ConnectionRefusedError:
            pass  # an ICMP port unreachable from before the receiver was up


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=5000)
    r.add_argument("--seconds", type=float, default=5)
    r.add_argument("--out", required=True)
    r.add_argument("--ready", help="file created once the socket is bound")
    sd = sub.add_parser("send")
    sd.add_argument("--dst", required=True)
    sd.add_argument("--port", type=int, default=5000)
    sd.add_argument("--pps", type=float, default=1000)
    sd.add_argument("--seconds", type=float, default=3)
    sd.add_argument("--flows", type=int, default=1)
    sd.add_argument("--tos", type=int, default=0)
    sd.add_argument("--size", type=int, default=64)
    sd.add_argument("--connect", action="store_true",
                    help="connected sockets (distinct IPv4 ids per packet)")
    a = ap.parse_args()
    recv(a) if a.cmd == "recv" else send(a)


if __name__ == "__main__":
    main()
