"""Entries and packets the pipeline tests share: a router with one neighbor per port, routes,
multipath groups, and paced send / deadline-bounded collect.

Port p: router MAC 02:00:00:00:00:0p, neighbor MAC 02:00:00:00:bb:0p, nexthop id p.
"""
import ipaddress
import struct
import time
import zlib

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

# Values of p4/include/constants.p4 (the Rust side gets them generated; the tests restate them
# and test_contract.py checks they agree with the P4 source).
MODE_HASH = 0
MODE_SPRAY = 1
MODE_ADAPTIVE = 2
MODE_FLOWLET = 3
MODE_ENTROPY = 4
DROP_TTL_EXPIRED = 4
DROP_NO_ROUTE = 5
DROP_ROUTER_MAC_MISMATCH = 2
DROP_NO_LIVE_MEMBER = 8
DROP_EGRESS_PORT_DOWN = 9
DROP_PFC_WATCHDOG = 10
PFC_CLONE_SESSION_BASE = 1024
CPU_PORT = 255
ETHERTYPE_POSTCARD = 0x88B5
PACKET_IN_REASON_POSTCARD = 1
PACKET_IN_REASON_PFC = 2

HOST_MAC = "02:00:00:00:cc:01"


def router_mac(p):
    return 0x020000000000 | p


def neighbor_mac(p):
    return 0x02000000BB00 | p


def mac_str(v):
    return ":".join(f"{(v >> (8 * i)) & 0xFF:02x}" for i in reversed(range(6)))


def ip4(s):
    return int(ipaddress.IPv4Address(s))


def ip6(s):
    return int(ipaddress.IPv6Address(s))


def basic_router(c, ports=(1, 2, 3, 4)):
    """Router MAC on every port, nexthop p -> port p."""
    for p in ports:
        c.insert("port_config_table", {"port": p}, "set_port_config",
                 {"router_mac": router_mac(p)})
        c.insert("nexthop_table", {"nexthop_id": p}, "set_nexthop",
                 {"egress_port": p, "dst_mac": neighbor_mac(p), "src_mac": router_mac(p)})


def route4(c, prefix, nexthop=None, group=None):
    net = ipaddress.IPv4Network(prefix)
    match = {"ipv4_dst": (int(net.network_address), net.prefixlen)}
    if group is not None:
        c.insert("ipv4_table", match, "set_wcmp_group_id", {"wcmp_group_id": group})
    else:
        c.insert("ipv4_table", match, "set_nexthop_id", {"nexthop_id": nexthop})


def route6(c, prefix, nexthop):
    net = ipaddress.IPv6Network(prefix)
    c.insert("ipv6_table", {"ipv6_dst": (int(net.network_address), net.prefixlen)},
             "set_nexthop_id", {"nexthop_id": nexthop})


def wcmp_group(c, group_id, members, mode=MODE_HASH, gap_us=0, epoch=1, watch=False):
    """members: [(nexthop_id (= port), weight)]. Writes the action-profile members and group,
    the wcmp_group_table entry, and the group's mode (wildcard traffic class)."""
    entities = []
    gmembers = []
    for i, (nh, weight) in enumerate(members):
        mid = group_id * 100 + i
        entities.append(c.member("wcmp_group_selector", mid, "set_wcmp_member",
                                 {"nexthop_id": nh, "egress_port": nh}))
        gmembers.append((mid, weight, nh if watch else None))
    c.write(entities)
    c.write([c.group("wcmp_group_selector", group_id, gmembers)])
    c.write([
        c.table_entry("wcmp_group_table", {"wcmp_group_id": group_id}, group_id=group_id),
        c.table_entry("multipath_mode_table",
                      {"wcmp_group_id": group_id, "traffic_class": (0, 0)},
                      "set_multipath_mode",
                      {"mode": mode, "flowlet_gap_us": gap_us, "epoch": epoch}, priority=10),
    ])


def switch_config(c, classes=None, switch_id=0, sample_n=0, session=0, hash_seed=0,
                  watchdog_ports=()):
    """switch_config_table's default action: postcard settings, the hash seed, the DSCP
    classification (`classes`: {dscp: (traffic_class, lossless)}) and the ports that have
    pfc_watchdog_table entries. Each call sets all of them (unset ones to 0)."""
    class_map = mapped = 0
    for dscp, (tc, lossless) in (classes or {}).items():
        class_map |= ((int(bool(lossless)) << 3) | tc) << (4 * dscp)
        mapped |= 1 << dscp
    ports = 0
    for p in watchdog_ports:
        ports |= 1 << p
    c.set_default("switch_config_table", "set_switch_config",
                  {"switch_id": switch_id, "postcard_sample_n": sample_n,
                   "postcard_session": session, "hash_seed": hash_seed,
                   "dscp_class_map": class_map, "dscp_mapped": mapped,
                   "watchdog_ports": ports})


def queue_config(c, port, queue, ecn=None, pfc=None, histogram_shift=0, modify=False):
    """queue_config_table entry of (port, queue): ecn = (kmin, kmax, pmax_percent) or None,
    pfc = (xoff, xon, quanta) or None; the counter cells are the queue's own."""
    params = {"port_index": port, "queue_index": port * 8 + queue,
              "histogram_base": port * 16, "histogram_shift": histogram_shift,
              "ecn_enabled": int(ecn is not None)}
    kmin, kmax, pmax = ecn if ecn is not None else (0, 0, 0)
    params.update({"kmin": kmin, "kmax": kmax, "pmax_percent": pmax})
    action = "set_queue_config"
    if pfc is not None:
        action = "set_queue_config_pfc"
        params.update(dict(zip(("xoff", "xon", "quanta"), pfc)))
    write = c.modify if modify else c.insert
    write("queue_config_table", {"port": port, "queue": queue}, action, params)


def crc16_arc(data):
    """BMv2's crc16 (CRC-16/ARC: reflected poly 0x8005, init 0, no final xor)."""
    c = 0
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
    return c


def flow_hash4(src, dst, proto, sport, dport, dst_qp=0):
    """The pipeline's flow hash of an IPv4 flow (p4/include/flow.p4): crc32 of the 40-byte key
    (addresses zero-extended to 128 bits) modulo 0xffffffff."""
    key = (bytes(12) + ipaddress.IPv4Address(src).packed + bytes(12)
           + ipaddress.IPv4Address(dst).packed
           + struct.pack("!BHH", proto, sport, dport) + dst_qp.to_bytes(3, "big"))
    return zlib.crc32(key) % 0xFFFFFFFF


def hash_member(flow_hash, seed, members):
    """Index of the member HASH mode picks among `members` equal-weight members (in the order
    they were written): the selector's crc16 of flow_hash * (seed | 1), modulo the count."""
    key = (flow_hash * (seed | 1)) & 0xFFFFFFFF
    return crc16_arc(key.to_bytes(4, "big")) % members


def trim_config(c, size=0, dscp=0, queue=0, threshold=0, queues=(), ports=()):
    """trim_config_table's default action: trim packets of traffic classes `queues` leaving
    by `ports` once the port's queue estimate is >= `threshold` packets, to `size` bytes,
    re-marked `dscp`, in queue `queue`."""
    qmask = pmask = 0
    for q in queues:
        qmask |= 1 << q
    for p in ports:
        pmask |= 1 << p
    c.set_default("trim_config_table", "set_trim_config",
                  {"trim_size": size, "trim_dscp": dscp, "trim_queue": queue,
                   "threshold": threshold, "queues": qmask, "ports": pmask})


def set_down_ports(c, ports):
    mask = 0
    for p in ports:
        mask |= 1 << p
    c.set_default("port_status_table", "set_port_down_mask", {"down_mask": mask})


def udp4(dst="10.0.2.1", src="10.0.1.1", sport=1000, dport=2000, ttl=64, tos=0, port_in=1,
         payload=b"x" * 32, dst_mac=None):
    return (Ether(dst=mac_str(dst_mac if dst_mac is not None else router_mac(port_in)),
                  src=HOST_MAC)
            / IP(src=src, dst=dst, ttl=ttl, tos=tos) / UDP(sport=sport, dport=dport)
            / Raw(payload))


def udp6(dst="2001:db8:2::1", src="2001:db8:1::1", hlim=64, port_in=1, sport=1000, dport=2000):
    return (Ether(dst=mac_str(router_mac(port_in)), src=HOST_MAC)
            / IPv6(src=src, dst=dst, hlim=hlim) / UDP(sport=sport, dport=dport)
            / Raw(b"y" * 32))


def bth(opcode=0x04, dst_qp=0x11, psn=0, ack_req=0):
    """RoCEv2 base transport header bytes (12) + a 16-byte payload + 4-byte ICRC stand-in."""
    return struct.pack("!BBHII", opcode, 0x40, 0xFFFF, dst_qp & 0xFFFFFF,
                       (ack_req << 31) | (psn & 0xFFFFFF)) + b"p" * 16 + b"\0" * 4


def roce4(dst="10.0.2.1", src="10.0.1.1", dst_qp=0x11, psn=0, sport=49152, tos=0x02, port_in=1,
          payload=0, opcode=0x04):
    """A RoCEv2 packet; `payload` more bytes after the BTH's stand-in payload."""
    return (Ether(dst=mac_str(router_mac(port_in)), src=HOST_MAC)
            / IP(src=src, dst=dst, ttl=64, tos=tos) / UDP(sport=sport, dport=4791)
            / Raw(bth(opcode=opcode, dst_qp=dst_qp, psn=psn) + b"d" * payload))


def send_paced(port, frames, gap=0.002):
    """Send frames one by one, `gap` seconds apart: BMv2 drops most of a back-to-back burst."""
    for f in frames:
        port.send(bytes(f))
        time.sleep(gap)


def wait_for(cond, timeout=10.0, step=0.05):
    """Poll `cond()` until it is truthy or the deadline passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(step)


def packet_ins(c, expected, timeout=5.0, settle=1.0):
    """The packet-ins that arrive: up to `expected` waiting `timeout` for each, then one more
    waited for `settle`, so a test sees a stray beyond what it expected."""
    got = []
    while len(got) <= expected:
        pkt = c.wait_packet_in(timeout=timeout if len(got) < expected else settle)
        if pkt is None:
            break
        got.append(pkt)
    return got


def collect(sw, ports, total, timeout=15.0, settle=0.3):
    """Wait until the ports together received `total` frames (or the deadline), then a short
    settle time for strays; returns {port: [Ether]}."""
    wait_for(lambda: sum(len(sw.port(p).frames()) for p in ports) >= total, timeout)
    time.sleep(settle)
    return {p: [Ether(f) for f in sw.port(p).frames()] for p in ports}


def clear(sw, ports=(1, 2, 3, 4)):
    for p in ports:
        sw.port(p).clear()
