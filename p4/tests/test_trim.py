"""Packet trimming and entropy multipath on BMv2.

Congestion is built with BMv2's Thrift `set_queue_rate` on the egress port: the pipeline's queue
estimate (queue_depth_reg) is the depth a packet leaving the port saw, so once the slow port has
sent a packet or two with a backlog behind it, packets joining it are over the threshold."""
import struct

from scapy.layers.inet import IP, UDP, checksum
from scapy.layers.l2 import Ether

from fabric import (MODE_ENTROPY, MODE_HASH, basic_router, collect, hash_member, roce4, route4,
                    send_paced, switch_config, trim_config, wait_for, wcmp_group)

TRIM_SIZE = 128
TRIM_DSCP = 11
TRIM_QUEUE = 7
ROCE_DSCP = 26
ROCE_TC = 3
ECT0 = 0b10
PAYLOAD = 900


def setup(c, lossless=False, queues=(ROCE_TC,)):
    basic_router(c)
    switch_config(c, classes={ROCE_DSCP: (ROCE_TC, lossless), 10: (1, False),
                              TRIM_DSCP: (TRIM_QUEUE, False)})
    route4(c, "10.0.2.0/24", nexthop=2)
    route4(c, "10.0.3.0/24", nexthop=3)
    trim_config(c, size=TRIM_SIZE, dscp=TRIM_DSCP, queue=TRIM_QUEUE, threshold=4,
                queues=queues, ports=(2, 3))


def bth_fields(frame):
    """(opcode, destination QP, PSN) of a RoCE frame."""
    raw = bytes(frame[UDP].payload)
    opcode, _, _, qp, psn = struct.unpack("!BBHII", raw[:12])
    return opcode, qp & 0xFFFFFF, psn & 0xFFFFFF


def trimmed_count(c, port, tc):
    return c.counter("trim_counter", port * 8 + tc)[0]


def test_a_congested_port_trims_and_an_idle_one_does_not_and_the_bth_survives(switch):
    """Port 2 drains 20 pps; 40 RoCE packets of ~1 KB arrive at 500 pps: after the first
    dequeues show a backlog over 4 packets, arrivals are cut to 128 bytes, re-marked DSCP 11 and
    sent ahead in queue 7. The same traffic to idle port 3 is never trimmed."""
    c = switch.p4rt
    setup(c)
    switch.set_queue_rate(2, 20)
    tos = (ROCE_DSCP << 2) | ECT0
    frames = [roce4(dst="10.0.2.1", psn=i, dst_qp=0x123, tos=tos, payload=PAYLOAD)
              for i in range(40)]
    frames += [roce4(dst="10.0.3.1", psn=100 + i, dst_qp=0x456, tos=tos, payload=PAYLOAD)
               for i in range(20)]
    send_paced(switch.port(1), frames, gap=0.002)
    got = collect(switch, [2, 3], 60, timeout=40)
    assert len(got[2]) == 40 and len(got[3]) == 20, {p: len(v) for p, v in got.items()}
    full_len = len(bytes(frames[0]))
    trimmed = [f for f in got[2] if len(bytes(f)) == TRIM_SIZE]
    whole = [f for f in got[2] if len(bytes(f)) == full_len]
    assert len(trimmed) + len(whole) == 40
    assert len(trimmed) >= 10 and len(whole) >= 1, (len(trimmed), len(whole))
    for f in trimmed:
        ip = f[IP]
        assert ip.tos >> 2 == TRIM_DSCP and ip.tos & 3 == ECT0
        assert ip.len == TRIM_SIZE - 14 and f[UDP].len == TRIM_SIZE - 34
        assert f[UDP].chksum == 0
        assert checksum(bytes(ip)[:20]) == 0, "IPv4 header checksum recomputed"
        opcode, qp, psn = bth_fields(f)
        assert (opcode, qp) == (0x04, 0x123) and 0 <= psn < 40
    # Every PSN arrived once, whole or trimmed: the receiver can ask for exactly the missing ones.
    assert sorted(bth_fields(f)[2] for f in got[2]) == list(range(40))
    for f in whole:
        assert f[IP].tos >> 2 == ROCE_DSCP
    assert all(len(bytes(f)) == full_len and f[IP].tos >> 2 == ROCE_DSCP for f in got[3])
    assert wait_for(lambda: trimmed_count(c, 2, ROCE_TC) == len(trimmed))
    assert trimmed_count(c, 3, ROCE_TC) == 0
    # Trimmed packets left by the trimmed queue.
    assert c.counter("queue_tx_counter", 2 * 8 + TRIM_QUEUE)[0] == len(trimmed)


def test_lossless_and_untrimmable_traffic_is_never_trimmed(switch):
    """Same congestion; DSCP 26 is now lossless (its class is even in the trim mask) and DSCP 10
    is a lossy class the mask leaves out: every packet arrives whole."""
    c = switch.p4rt
    setup(c, lossless=True, queues=(ROCE_TC,))
    switch.set_queue_rate(2, 20)
    frames = []
    for i in range(20):
        frames.append(roce4(psn=i, tos=(ROCE_DSCP << 2) | ECT0, payload=PAYLOAD))
        frames.append(roce4(psn=1000 + i, tos=10 << 2, payload=PAYLOAD))
    send_paced(switch.port(1), frames, gap=0.002)
    got = collect(switch, [2], 40, timeout=40)[2]
    assert len(got) == 40
    full_len = len(bytes(frames[0]))
    assert all(len(bytes(f)) == full_len for f in got)
    assert c.counters("trim_counter") == {}


def test_entropy_mode_spreads_one_flow_by_source_port_and_keeps_a_source_port_on_one_path(
        switch):
    """One QP between one host pair: with 64 source ports its packets take both members, each
    as the seeded hash of the source port alone predicts; with one source port, changing
    everything else (destination QP, source address) keeps one path."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_ENTROPY)
    route4(c, "10.0.2.0/24", group=1)
    sports = [49152 + 37 * i for i in range(64)]
    send_paced(switch.port(1), [roce4(sport=s, dst_qp=0x77, psn=i) for i, s in enumerate(sports)])
    got = collect(switch, [2, 3], 64)
    assert len(got[2]) + len(got[3]) == 64
    assert min(len(got[2]), len(got[3])) >= 10, {p: len(v) for p, v in got.items()}
    for port, frames in got.items():
        for f in frames:
            assert [2, 3][hash_member(f[UDP].sport, 0, 2)] == port, (f[UDP].sport, port)
    for p in (2, 3):
        switch.port(p).clear()
    one = [roce4(sport=50000, dst_qp=qp, src=f"10.0.1.{1 + qp % 200}", psn=qp)
           for qp in range(40)]
    send_paced(switch.port(1), one)
    got = collect(switch, [2, 3], 40)
    assert sorted([len(got[2]), len(got[3])]) == [0, 40], {p: len(v) for p, v in got.items()}


def test_hash_mode_spreads_what_entropy_mode_keeps_together(switch):
    """The contrast: in HASH mode the same one-source-port traffic (40 QPs) spreads."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_HASH)
    route4(c, "10.0.2.0/24", group=1)
    send_paced(switch.port(1), [roce4(sport=50000, dst_qp=qp, psn=qp) for qp in range(40)])
    got = collect(switch, [2, 3], 40)
    assert len(got[2]) + len(got[3]) == 40
    assert min(len(got[2]), len(got[3])) >= 5, {p: len(v) for p, v in got.items()}
