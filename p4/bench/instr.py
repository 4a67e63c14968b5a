#!/usr/bin/env python3
"""Instructions BMv2 executes per packet for each program of p4/bench/pps.py, counted by
valgrind's callgrind: the load-independent companion of pps.py's CPU time per packet.

A benchmark, not a test. On a machine shared with builds, pps.py's figures move by ±20% from
run to run; an instruction count does not (it moves by < 1%), so it is the figure to compare
two versions of the pipeline by, and its profile says where the instructions go. It counts
user-space instructions only (no kernel, no cache misses): a proxy for CPU time, not a rate.

Each program runs alone in simple_switch_grpc under `valgrind --tool=callgrind`, set up like
pps.py's switches; after setup and a few warm-up packets the counters are zeroed, COUNT frames
are sent paced at RATE (slow: BMv2 under valgrind is ~50x slower), and the counters are dumped.
Printed: instructions per delivered packet, the ratio to `minimal`, and with --profile the
functions that matter (inclusive instructions per packet; callgrind_annotate on the dump).
Idle threads add ~1.2k instructions per packet at the default rate.

usage: sudo .venv/bin/python p4/bench/instr.py [--count 400] [--rate 40] [--profile]
"""
import argparse
import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import pps  # noqa: E402
from weft_bmv2 import Bmv2, find_bmv2, socket_in_netns  # noqa: E402
from weft_p4rt import P4RuntimeClient  # noqa: E402

# What the profile shows: per-table log formatting (a hit's entry, every lookup's key), action
# execution, metadata reset, parser, conditions.
PROFILE = re.compile(r"dump_entry_string_|key_to_string_with_names|ActionFnEntry::execute\("
                     r"|PHV::reset_metadata|Parser::parse\(|Conditional::operator|get_unique_id"
                     r"|dump_match_entry_|ActionFnEntry::dump|Deparser::deparse|receive_\(")


def connect(bm, p4info, timeout=120.0):
    """A P4Runtime client, once BMv2 (slow to start under valgrind) accepts one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return P4RuntimeClient(bm.grpc_addr, bm.device_id, p4info)
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def measure(binary, workdir, name, json_path, p4info, setup, dscp, count, rate):
    """(delivered packets, instructions, dump file) of one program."""
    out = os.path.join(workdir, f"{name}.callgrind")
    wrapper = os.path.join(workdir, "simple_switch_grpc")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={out} "
                f"{binary} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    bm = Bmv2(wrapper, nports=3)
    c = sock = None
    try:
        for p in bm.ports.values():
            p.close()
        bm.ports = {}
        c = connect(bm, p4info)
        c.set_pipeline(json_path)
        setup(c)
        sock = socket_in_netns(bm.ns, socket.AF_PACKET, socket.SOCK_RAW, 0)
        sock.bind(("h1", 0))
        frame = pps.frame(dscp)
        for _ in range(20):
            sock.send(frame)
            time.sleep(0.02)
        time.sleep(1.0)
        subprocess.run(["callgrind_control", "-z", str(bm.proc.pid)], check=True,
                       capture_output=True)
        before = pps.rx_packets(bm.ns, "h2") + pps.rx_packets(bm.ns, "h3")
        for _ in range(count):
            sock.send(frame)
            time.sleep(1.0 / rate)
        time.sleep(2.0)
        got = pps.rx_packets(bm.ns, "h2") + pps.rx_packets(bm.ns, "h3") - before
        subprocess.run(["callgrind_control", "-d", str(bm.proc.pid)], check=True,
                       capture_output=True)
        time.sleep(1.0)
    finally:
        if sock is not None:
            sock.close()
        if c is not None:
            c.close()
        bm.close()
    # The dump is `<out>.1`; `<out>` itself is written at exit (shutdown only).
    dumps = sorted(glob.glob(out + ".*"))
    if not dumps:
        raise RuntimeError(f"{name}: callgrind wrote no dump")
    instructions = 0
    with open(dumps[0]) as f:
        for line in f:
            if line.startswith("summary:"):
                instructions = int(line.split()[1])
    return got, instructions, dumps[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--rate", type=float, default=40.0)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    binary = find_bmv2()
    if binary is None or shutil.which("valgrind") is None:
        print("SKIPPED: p4/bench/instr.py: needs BMv2 simple_switch_grpc and valgrind")
        return 0
    workdir = tempfile.mkdtemp(prefix="weft-instr-")
    try:
        results = {}
        for name, json_path, p4info, setup, dscp in pps.PROGRAMS:
            got, instructions, dump = measure(binary, workdir, name, json_path, p4info, setup,
                                              dscp, args.count, args.rate)
            per = instructions / got if got else float("nan")
            results[name] = per
            print(f"{name:13s} delivered {got:5d}/{args.count}  {per:10,.0f} instructions/packet",
                  flush=True)
            if args.profile and got:
                text = subprocess.run(["callgrind_annotate", "--inclusive=yes", dump],
                                      capture_output=True, text=True).stdout
                for line in text.splitlines():
                    m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S*?:(.*?)\s+\[", line)
                    if m and PROFILE.search(m.group(2)):
                        print(f"    {int(m.group(1).replace(',', '')) / got:9,.0f}  "
                              f"{m.group(2)[:100]}")
        for name in ("weft-nexthop", "weft-group"):
            print(f"ratio minimal/{name}: {results['minimal'] / results[name]:.2f}x "
                  f"(the packet rate each would reach on the same core, by instructions)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
