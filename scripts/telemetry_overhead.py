#!/usr/bin/env python3
"""What metrics and postcards cost, measured on the testbed (root, BMv2): the README's numbers.

usage: sudo scripts/telemetry_overhead.py [--seconds 20] [--pps 400] [--bin target/debug]

For each variant the small leaf-spine example is brought up, applied, and loaded with four
paced UDP streams (1000-byte datagrams, leafN-h1 -> leaf(N+2)-h1, each crossing 3 switches);
meanwhile every plugin's /metrics is scraped once a second (as Prometheus would). Measured:
  - each plugin's CPU time (utime+stime from /proc) over the load window, summed;
  - postcards received (weft_postcards_total) against the packets forwarded, and their bytes
    (each postcard is the packet's first 160 bytes plus the 40-byte postcard header, as a
    P4Runtime packet-in) as a share of the traffic's bytes.
Variants: "off" (no telemetry section, --metrics off), "metrics" (metrics only), "sampled"
(metrics + postcards at the default 1 in 1000), "watched" (metrics + one stream watched: a
postcard for every packet at every hop). Prints one JSON object per variant and a summary.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def sh(*cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def scrape(ns, addr):
    out = sh("ip", "netns", "exec", ns, "curl", "-s", "--max-time", "2", f"http://{addr}/metrics",
             check=False)
    return out.stdout


def metric_sum(text, name, want=None):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if want and want not in line:
                continue
            try:
                total += float(line.rsplit(" ", 1)[1])
            except ValueError:
                pass
    return total


def run_variant(name, a):
    d = tempfile.mkdtemp(prefix=f"weft-ovh-{name}-")
    fabric = f"ovh{name[:3]}{os.getpid() % 10000}"
    text = open(os.path.join(REPO, "topology/examples/leaf-spine-small.yaml")).read()
    text = text.replace("name: small", f"name: {fabric}").replace(
        "db_socket_dir: /run/weft/small", f"db_socket_dir: {d}/db")
    if name == "sampled":
        text += "\ntelemetry:\n  sample: 1000\n"
    if name == "watched":
        text += ("\ntelemetry:\n  sample: 0\n  watch:\n"
                 "    - {src: leaf1-h1, dst: leaf3-h1, protocol: udp, dst_port: 5000}\n")
    intent = os.path.join(d, "fabric.yaml")
    open(intent, "w").write(text)
    weft = os.path.join(a.bin, "weft")
    state = os.path.join(d, "state")
    up = [weft, "testbed", "up", intent, "--state-dir", state]
    if name == "off":
        up += ["--plugin-arg=--metrics", "--plugin-arg=off"]
    try:
        sh(*up)
        for _ in range(3):
            if sh(weft, "apply", intent, "--timeout", "60s", check=False).returncode == 0:
                break
            time.sleep(3)
        st = json.load(open(os.path.join(state, "state.json")))
        ns = st["netns"]
        hosts = {h["name"]: h for h in st["hosts"]}
        for _ in range(60):
            if sh(weft, "testbed", "ping", intent, "--state-dir", state, check=False).returncode == 0:
                break
            time.sleep(1)
        plugins = [p["pid"] for p in st["processes"] if p["name"].startswith("plugin ")]
        targets = [s["metrics"] for s in st["switches"] if s.get("metrics")]
        probe = os.path.join(REPO, "tests/scripts/udp_probe.py")
        pairs = [("leaf1-h1", "leaf3-h1"), ("leaf2-h1", "leaf4-h1"),
                 ("leaf3-h2", "leaf1-h2"), ("leaf4-h2", "leaf2-h2")]
        before = {t: scrape(ns, t) for t in targets}
        c0 = sum(cpu_s(p) for p in plugins)
        t0 = time.monotonic()
        senders = [subprocess.Popen(
            ["ip", "netns", "exec", f"{ns}:{s}", "python3", probe, "send", "--dst",
             hosts[r]["ipv4"], "--port", "5000", "--pps", str(a.pps), "--seconds",
             str(a.seconds), "--size", "1000", "--flows", "4"]) for s, r in pairs]
        while any(p.poll() is None for p in senders):
            for t in targets:
                scrape(ns, t)
            time.sleep(1)
        wall = time.monotonic() - t0
        c1 = sum(cpu_s(p) for p in plugins)
        time.sleep(1.5)
        after = {t: scrape(ns, t) for t in targets}
        stored = sum(metric_sum(after[t], "weft_postcards_total", 'result="stored"')
                     - metric_sum(before[t], "weft_postcards_total", 'result="stored"')
                     for t in targets)
        lagged = sum(metric_sum(after[t], "weft_postcards_total", 'result="lagged"')
                     - metric_sum(before[t], "weft_postcards_total", 'result="lagged"')
                     for t in targets)
        packets = len(pairs) * a.pps * a.seconds
        hops = 3
        frame = 1000 + 8 + 20 + 14
        postcard_bytes = 14 + 40 + min(160 - 54, 20 + 8 + 1000)
        r = {
            "variant": name,
            "seconds": round(wall, 1),
            "packets_sent": packets,
            "plugin_cpu_s": round(c1 - c0, 2),
            "plugin_cpu_percent_per_switch": round(100 * (c1 - c0) / wall / len(plugins), 2),
            "postcards": int(stored),
            "postcards_lagged": int(lagged),
            "postcards_per_packet_hop": round(stored / (packets * hops), 5),
            "postcard_bytes_share_per_hop": round(stored * postcard_bytes / (packets * hops * frame), 6),
        }
        if name == "watched":
            # One of the four streams is watched: its packet-hops, and its own bytes.
            watched = a.pps * a.seconds * hops
            r["postcards_per_watched_packet_hop"] = round(stored / watched, 4)
            r["postcard_bytes_share_of_watched_flow"] = round(stored * postcard_bytes / (watched * frame), 4)
        print(json.dumps(r), flush=True)
        return r
    finally:
        sh(weft, "testbed", "down", intent, "--state-dir", state, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--pps", type=int, default=400)
    ap.add_argument("--bin", default=os.path.join(REPO, "target/debug"))
    ap.add_argument("--variants", default="off,metrics,sampled,watched")
    a = ap.parse_args()
    res = [run_variant(v, a) for v in a.variants.split(",")]
    print("load:", open("/proc/loadavg").read().strip(), file=sys.stderr)
    for r in res:
        print(f"{r['variant']:8} plugin CPU {r['plugin_cpu_percent_per_switch']:6.2f}% per switch, "
              f"{r['postcards']} postcards ({r['postcards_per_packet_hop']} per packet-hop, "
              f"{100 * r['postcard_bytes_share_per_hop']:.4f}% of the bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
