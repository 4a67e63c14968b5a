#!/usr/bin/env python3
"""Paced UDP probes for Weft's testbed scenarios (run inside a host namespace).

  udp_probe.py recv --port 5000 --seconds 8 --out r.json [--log packets.csv]
      counts packets, sequence gaps, the largest gap between arrivals, and CE-marked packets;
      --log writes one line per packet: sequence, sent, kernel arrival, read (ns since the epoch)
  udp_probe.py send --dst 10.0.0.18 --port 5000 --pps 1000 --seconds 5 [--flows 64] [--tos 2] [--connect] [--out s.json]
      sends sequence-numbered packets at a steady pace, rotating over --flows source ports;
      --out reports how many it sent and every send more than 2 ms behind its schedule

Standard library only. Pacing is by absolute deadlines, so a late wakeup does not shift the
rest of the stream; a sender behind schedule catches up at no more than 4 times its rate.
"""
import argparse
import json
import socket
import struct
import time

HDR = struct.Struct("!QQ")  # sequence, send time (ns since the epoch: one clock for all hosts)
# Linux's SO_TIMESTAMPNS (= SCM_TIMESTAMPNS), which Python's socket module does not name: the
# kernel's receive time of each datagram, so a receiver scheduled late is not a network gap.
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")
LATE_NS = 2_000_000  # sends later than this behind schedule are reported one by one
CATCH_UP = 4  # a sender behind schedule catches up at most this many times its rate


def recv(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind(("0.0.0.0", a.port))
    s.settimeout(0.2)
    if a.ready:
        # Bound: packets from now on are counted (the sender waits for this file).
        open(a.ready, "w").close()
    end = time.monotonic() + a.seconds
    arrivals = []
    kernel = []  # (kernel arrival, sequence), ns since the epoch
    log = []
    seqs = set()
    sent_at = {}
    ce = 0
    latency_us = []
    anc_space = socket.CMSG_SPACE(1) + socket.CMSG_SPACE(TIMESPEC.size)
    while time.monotonic() < end:
        try:
            data, anc, _flags, _addr = s.recvmsg(2048, anc_space)
        except socket.timeout:
            continue
        now = time.monotonic_ns()
        read_at = time.time_ns()
        if len(data) < HDR.size:
            continue
        seq, sent = HDR.unpack_from(data)
        sent_at[seq] = sent
        # One-way latency on the one clock all namespaces share.
        latency_us.append((read_at - sent) / 1e3)
        k = None
        for level, typ, val in anc:
            if level == socket.IPPROTO_IP and typ == socket.IP_TOS and val and (val[0] & 3) == 3:
                ce += 1
            if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS and len(val) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(val)
                k = sec * 1_000_000_000 + nsec
        if k is not None:
            kernel.append((k, seq))
        if a.log:
            log.append((seq, sent, k if k is not None else 0, read_at))
        seqs.add(seq)
        arrivals.append(now)
    gaps = [b - a_ for a_, b in zip(arrivals, arrivals[1:])]
    # The largest gap between two datagrams' arrivals in the kernel, and where it was.
    kgap = (0, None, None)
    for (ka, sa), (kb, _) in zip(kernel, kernel[1:]):
        if kb - ka > kgap[0]:
            kgap = (kb - ka, ka, sa)
    # The loss window on the sender's clock: between the last packet that arrived before a run
    # of lost ones and the first that arrived after it. Unlike arrival gaps, a sender or
    # receiver that was merely scheduled late does not count.
    order = sorted(sent_at)
    arrived = dict((q, k) for k, q in kernel)
    outage = (0, None)
    runs = []
    for i, (x, y) in enumerate(zip(order, order[1:])):
        if y - x > 1:
            # What preceded the loss: the path's delay (kernel arrival - send) of the packet
            # before it (a queue building up in a switch) and how many of the 20 sends before
            # it left less than 0.2 ms apart (a sender catching up on its schedule in a burst).
            before = order[max(0, i - 19):i + 1]
            burst = sum(1 for p, q in zip(before, before[1:]) if sent_at[q] - sent_at[p] < 200_000)
            runs.append({"after_seq": x, "lost": y - x - 1, "from_unix_ms": sent_at[x] / 1e6,
                         "ms": (sent_at[y] - sent_at[x]) / 1e6,
                         "delay_before_ms": ((arrived[x] - sent_at[x]) / 1e6) if x in arrived else None,
                         "burst_before": burst})
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
        "max_kernel_gap_ms": (kgap[0] / 1e6) if kgap[1] is not None else None,
        "kernel_gap_from_unix_ms": (kgap[1] / 1e6) if kgap[1] is not None else None,
        "kernel_gap_after_seq": kgap[2],
        "latency_us": {
            "min": min(latency_us) if latency_us else None,
            "p50": sorted(latency_us)[len(latency_us) // 2] if latency_us else None,
            "max": max(latency_us) if latency_us else None,
        },
    }
    with open(a.out, "w") as f:
        json.dump(out, f)
    if a.log:
        with open(a.log, "w") as f:
            f.write("seq,sent_ns,kernel_ns,read_ns\n")
            for row in log:
                f.write("%d,%d,%d,%d\n" % row)


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
    sent = errors = 0
    late = []
    max_late = 0
    last = None
    for seq in range(n):
        target = t0 + seq * period
        # Behind schedule (the sender was not scheduled), catch up at no more than 4 times the
        # rate: sending the missed packets back to back is a burst no paced source makes, and a
        # software switch's 64-packet queue drops it.
        if last is not None:
            target = max(target, last + period / CATCH_UP)
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        last = time.monotonic()
        target = t0 + seq * period
        x = socks[seq % len(socks)]
        now = time.time_ns()
        behind = int((time.monotonic() - target) * 1e9)
        max_late = max(max_late, behind)
        if behind > LATE_NS and len(late) < 200:
            late.append({"seq": seq, "unix_ms": now / 1e6, "late_ms": behind / 1e6})
        data = HDR.pack(seq, now) + pad
        try:
            if a.connect:
                x.send(data)
            else:
                x.sendto(data, (a.dst, a.port))
            sent += 1
        except OSError:
            # ConnectionRefusedError: an ICMP port unreachable from before the receiver was
            # up, reported on this send, which then did not go out.
            errors += 1
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"sent": sent, "errors": errors, "max_late_ms": max_late / 1e6,
                       "late": late}, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--port", type=int, default=5000)
    r.add_argument("--seconds", type=float, default=5)
    r.add_argument("--out", required=True)
    r.add_argument("--ready", help="file created once the socket is bound")
    r.add_argument("--log", help="one line per datagram (CSV)")
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
    sd.add_argument("--out", help="the sender's report (JSON)")
    a = ap.parse_args()
    recv(a) if a.cmd == "recv" else send(a)


if __name__ == "__main__":
    main()
