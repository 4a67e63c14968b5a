#!/usr/bin/env python3
"""Packets per second through BMv2 simple_switch_grpc: Weft's pipeline vs a minimal L3 program
(p4/bench/minimal_l3.p4), on the same machine in the same run.

A benchmark, not a test. Three switches run side by side in private namespaces (an idle BMv2
costs no CPU): `minimal` (one LPM table), `weft-nexthop` (route -> nexthop) and `weft-group`
(route -> 2-member hash group, DSCP classification, ECN and PFC thresholds configured: the path
fabric traffic takes). For each offered rate, each program gets the same paced UDP stream from
port 1 for DURATION seconds, in turn; delivered packets are read from the kernel's counters of
the receiving veth, so the measuring side costs nothing per packet.

Reported per program: delivered pps at each offered rate, the highest offered rate delivered
with < 1% loss, the peak delivered rate, and the ratios to `minimal` (goal: weft >= 0.7x).
Also the CPU time BMv2 spent per delivered packet (utime + stime of the switch process over
every rate, /proc/PID/stat): on a shared machine the rates move with the other load, the CPU
cost of a packet much less, so its ratio (minimal's cost / weft's, i.e. the packet rate each
would reach on the same core) is the steadier figure.

The per-CPU ratio depends on how BMv2 was built: configured by default, BMv2 formats a debug log
line per table lookup and action even at `--log-level off`, which costs a program in proportion to
its tables (the full fabric path has many, the minimal program one); configured with
`--disable-logging-macros` it does not. The bench prints which build it ran on (the version, and
the logging and event-logger macros from the `bm/config.h` installed beside the binary).

usage: sudo .venv/bin/python p4/bench/pps.py [--rates 5000,10000,...] [--duration 2]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

HERE = os.path.dirname(os.path.abspath(__file__))
P4_DIR = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(P4_DIR, "tests"))

from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

from weft_bmv2 import Bmv2, find_bmv2, socket_in_netns  # noqa: E402
from weft_p4rt import P4RuntimeClient  # noqa: E402
import fabric  # noqa: E402

ROUTER_MAC = "02:00:00:00:00:01"


def bmv2_build(binary):
    """What this BMv2 is: its version and whether its logging macros were compiled in."""
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    config = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(binary))),
                          "include", "bm", "config.h")
    try:
        with open(config) as f:
            text = f.read()
    except OSError:
        return f"BMv2 {version or '?'} (build options unknown: no {config})"

    def on(macro):
        return f"#define {macro} 1" in text

    logging = ("compiled in (configured by default)" if on("LOG_DEBUG_ON") or on("LOG_TRACE_ON")
               else "compiled out (--disable-logging-macros)")
    elog = "on" if on("ELOG_ON") else "off (--disable-elogger)"
    return f"BMv2 {version or '?'}: logging macros {logging}, event logger {elog} ({config})"


def rx_packets(ns, ifname):
    out = subprocess.run(["ip", "netns", "exec", ns, "ip", "-s", "-j", "link", "show", ifname],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)[0]["stats64"]["rx"]["packets"]


def cpu_seconds(pid):
    """utime + stime of process `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup_minimal(c):
    c.insert("ipv4_lpm", {"hdr.ipv4.dst_addr": (fabric.ip4("10.0.2.0"), 24)}, "forward",
             {"port": 2, "dst_mac": fabric.neighbor_mac(2), "src_mac": fabric.router_mac(2)})


def setup_weft_nexthop(c):
    fabric.basic_router(c, ports=(1, 2, 3))
    fabric.route4(c, "10.0.2.0/24", nexthop=2)


def setup_weft_group(c):
    fabric.basic_router(c, ports=(1, 2, 3))
    fabric.switch_config(c, classes={26: (3, True)}, hash_seed=0x9E3779B1)
    for p in (2, 3):
        fabric.queue_config(c, p, 3, ecn=(20, 60, 20), pfc=(50, 10, 0xFFFF))
    # Both members egress toward the receiving veth's switch port 2 and a second port 3; the
    # counter is read on both.
    fabric.wcmp_group(c, 1, [(2, 1), (3, 1)], mode=fabric.MODE_HASH)
    fabric.route4(c, "10.0.2.0/24", group=1)


PROGRAMS = [
    ("minimal", os.path.join(HERE, "minimal_l3.json"),
     os.path.join(HERE, "minimal_l3.p4info.txtpb"), setup_minimal, 1),
    ("weft-nexthop", os.path.join(P4_DIR, "build", "weft.json"),
     os.path.join(P4_DIR, "build", "weft.p4info.txtpb"), setup_weft_nexthop, 1),
    ("weft-group", os.path.join(P4_DIR, "build", "weft.json"),
     os.path.join(P4_DIR, "build", "weft.p4info.txtpb"), setup_weft_group, 26),
]


def frame(dscp):
    """The UDP frame every program is sent (from host 1 toward 10.0.2.0/24), with DSCP `dscp`."""
    return bytes(Ether(dst=fabric.mac_str(fabric.router_mac(1)), src=fabric.HOST_MAC)
                 / IP(src="10.0.1.1", dst="10.0.2.1", tos=dscp << 2)
                 / UDP(sport=1234, dport=5678) / (b"\0" * 18))


def blast(sock, frame, rate, duration):
    """Send `frame` at `rate` pps for `duration` s, in 1 ms batches (sleep precision)."""
    per_ms = max(1, rate // 1000)
    n = 0
    start = time.monotonic()
    end = start + duration
    while True:
        now = time.monotonic()
        if now >= end:
            break
        due = int((now - start) * rate) + per_ms
        while n < due:
            sock.send(frame)
            n += 1
        time.sleep(0.001)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="5000,10000,15000,20000,25000,30000")
    ap.add_argument("--duration", type=float, default=2.0)
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    binary = find_bmv2()
    if binary is None:
        print("SKIPPED: p4/bench/pps.py: BMv2 simple_switch_grpc not found (PATH, /opt/p4/bin)")
        return 0

    build = bmv2_build(binary)
    print(f"{binary}: {build}", flush=True)
    switches = []
    try:
        for name, json_path, p4info, setup, dscp in PROGRAMS:
            bm = Bmv2(binary, nports=3)
            c = sock = None
            try:
                # Delivered packets come from kernel counters: no per-port capture threads.
                for p in bm.ports.values():
                    p.close()
                bm.ports = {}
                c = P4RuntimeClient(bm.grpc_addr, bm.device_id, p4info)
                c.set_pipeline(json_path)
                setup(c)
                sock = socket_in_netns(bm.ns, socket.AF_PACKET, socket.SOCK_RAW, 0)
                sock.bind(("h1", 0))
            except BaseException:
                if c is not None:
                    c.close()
                bm.close()
                raise
            switches.append((name, bm, c, sock, frame(dscp)))

        results = {name: {} for name, *_ in switches}
        cpu = {name: [0.0, 0] for name, *_ in switches}
        for rate in rates:
            for name, bm, c, sock, pkt in switches:
                before = rx_packets(bm.ns, "h2") + rx_packets(bm.ns, "h3")
                cpu_before = cpu_seconds(bm.proc.pid)
                sent = blast(sock, pkt, rate, args.duration)
                time.sleep(0.5)
                got = rx_packets(bm.ns, "h2") + rx_packets(bm.ns, "h3") - before
                cpu[name][0] += cpu_seconds(bm.proc.pid) - cpu_before
                cpu[name][1] += got
                results[name][rate] = (sent, got)
                print(f"{name:13s} offered {rate:6d} pps: sent {sent:7d} delivered {got:7d} "
                      f"({got / args.duration:8.0f} pps, loss {100 * (1 - got / sent):5.1f}%)",
                      flush=True)

        print()
        print(f"{'program':13s} {'best loss-free (<1%)':>22s} {'max delivered pps':>18s} "
              f"{'CPU us/packet':>14s}")
        summary = {}
        for name, per_rate in results.items():
            lossless = [r for r, (s, g) in per_rate.items() if s and g >= 0.99 * s]
            best = max(lossless) if lossless else 0
            peak = max(g / args.duration for s, g in per_rate.values())
            seconds, packets = cpu[name]
            us = 1e6 * seconds / packets if packets else float("nan")
            summary[name] = (best, peak, us)
            print(f"{name:13s} {best:22d} {peak:18.0f} {us:14.1f}")
        base_best, base_peak, base_us = summary["minimal"]
        for name in ("weft-nexthop", "weft-group"):
            best, peak, us = summary[name]
            rb = best / base_best if base_best else float("nan")
            rp = peak / base_peak if base_peak else float("nan")
            rc = base_us / us if us else float("nan")
            print(f"ratio {name}/minimal: loss-free {rb:.2f}x, peak {rp:.2f}x, "
                  f"per CPU {rc:.2f}x (goal >= 0.70x)")
        print(f"on {build}; load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    finally:
        for name, bm, c, sock, _ in switches:
            sock.close()
            c.close()
            bm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
