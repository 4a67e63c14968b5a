"""QoS on BMv2: ECN marking from (port, queue) thresholds, PFC pause/resume generation and
reception counting, the PFC watchdog. Congestion is built with BMv2's Thrift `set_queue_rate`.

BMv2 counts queue depth in packets; thresholds here are packets."""
import struct

from scapy.layers.inet import IP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from fabric import (DROP_PFC_WATCHDOG, PACKET_IN_REASON_PFC, PFC_CLONE_SESSION_BASE, basic_router,
                    collect, mac_str, packet_ins, queue_config, route4, router_mac, send_paced,
                    switch_config, udp4, wait_for)

DSCP_LOSSLESS = 26
TC_LOSSLESS = 3
ECT0 = 0b10
CE = 0b11


def classify(c, watchdog_ports=()):
    switch_config(c, classes={DSCP_LOSSLESS: (TC_LOSSLESS, True)}, watchdog_ports=watchdog_ports)


def test_ecn_marks_ce_above_kmax_under_congestion_and_never_below_kmin(switch):
    """Port 2 drains 20 pps; 60 ECT(0) packets arrive at ~500 pps, so the queue climbs past
    Kmax=15. The first 5 packets (depth < Kmin=5 by construction) are never marked, the last 10
    (depth >= Kmax) always are; the mark counter equals the CE packets received."""
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    queue_config(c, 2, 0, ecn=(5, 15, 20))
    switch.set_queue_rate(2, 20)
    send_paced(switch.port(1), [udp4(tos=ECT0, sport=i) for i in range(60)], gap=0.002)
    got = collect(switch, [2], 60, timeout=30)[2]
    assert len(got) == 60
    got.sort(key=lambda p: p[IP].payload.sport)
    ecn = [p[IP].tos & 3 for p in got]
    assert all(e == ECT0 for e in ecn[:5]), ecn
    assert all(e == CE for e in ecn[-10:]), ecn
    marked = sum(1 for e in ecn if e == CE)
    assert wait_for(lambda: c.counter("ecn_mark_counter", 2 * 8 + 0)[0] == marked)
    # The queue-depth histogram of port 2 (shift 0: bucket = depth, saturating at 15) saw both
    # an empty queue and the saturated top bucket.
    hist = c.counters("queue_depth_histogram")
    assert hist.get(2 * 16 + 0, (0,))[0] >= 1 and hist.get(2 * 16 + 15, (0,))[0] >= 10, hist
    assert sum(v[0] for i, v in hist.items() if 32 <= i < 48) == 60
    assert c.counter("queue_tx_counter", 2 * 8 + 0)[0] == 60


def test_ecn_never_marks_an_uncongested_queue(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    queue_config(c, 2, 0, ecn=(5, 15, 100))
    send_paced(switch.port(1), [udp4(tos=ECT0, sport=i) for i in range(50)], gap=0.005)
    got = collect(switch, [2], 50)[2]
    assert len(got) == 50
    assert all(p[IP].tos & 3 == ECT0 for p in got)
    assert c.counters("ecn_mark_counter") == {}


def pfc_frames(frames):
    out = []
    for f in frames:
        if f[Ether].type == 0x8808:
            raw = bytes(f[Ether].payload)
            opcode, enable, *times = struct.unpack("!HH8H", raw[:20])
            out.append((f, opcode, enable, times))
    return out


def test_pfc_pause_goes_upstream_over_xoff_and_resume_follows_under_xon(switch):
    """Lossless class 3 to port 2 (drains 20 pps), xoff 10 / xon 2 packets: the port the
    traffic came from (1) receives one PAUSE (class 3, quanta 0xffff), then, once the queue has
    drained, one RESUME (quanta 0); the tx counters say the same."""
    c = switch.p4rt
    basic_router(c)
    classify(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    queue_config(c, 2, TC_LOSSLESS, pfc=(10, 2, 0xFFFF))
    c.clone_session(PFC_CLONE_SESSION_BASE + 1, [1])
    switch.set_queue_rate(2, 20)
    send_paced(switch.port(1), [udp4(tos=DSCP_LOSSLESS << 2, sport=i) for i in range(30)])
    assert wait_for(lambda: len(pfc_frames([Ether(f) for f in switch.port(1).frames()])) >= 2,
                    timeout=30)
    collect(switch, [2], 30, timeout=30)
    frames = pfc_frames([Ether(f) for f in switch.port(1).frames()])
    assert len(frames) == 2, frames
    (pause, op1, en1, t1), (resume, op2, en2, t2) = frames
    assert pause[Ether].dst == "01:80:c2:00:00:01"
    assert pause[Ether].src == mac_str(router_mac(1))
    assert (op1, en1, t1) == (0x0101, 1 << TC_LOSSLESS, [0, 0, 0, 0xFFFF, 0, 0, 0, 0])
    assert (op2, en2, t2) == (0x0101, 1 << TC_LOSSLESS, [0] * 8)
    assert len(bytes(pause)) == 60
    assert c.counter("pfc_tx_pause_counter", 1 * 8 + TC_LOSSLESS)[0] == 1
    assert c.counter("pfc_tx_resume_counter", 1 * 8 + TC_LOSSLESS)[0] == 1


def test_received_pfc_frames_are_counted_per_port_and_priority_and_not_forwarded(switch):
    c = switch.p4rt
    basic_router(c)
    # Priority 0: pause (quanta 100); priority 3: resume (quanta 0).
    body = struct.pack("!HH8H", 0x0101, 0b1001, 100, 0, 0, 0, 0, 0, 0, 0) + b"\0" * 26
    frame = Ether(dst="01:80:c2:00:00:01", src="02:00:00:00:cc:01", type=0x8808) / Raw(body)
    send_paced(switch.port(1), [frame] * 3)
    assert wait_for(lambda: c.counter("pfc_rx_pause_counter", 8 + 0)[0] == 3)
    assert c.counter("pfc_rx_resume_counter", 8 + 3)[0] == 3
    assert set(c.counters("pfc_rx_pause_counter")) == {8}
    assert set(c.counters("pfc_rx_resume_counter")) == {11}
    assert not any(switch.port(p).frames() for p in (2, 3, 4))
    assert c.counters("drop_reason_counter") == {}


def test_a_received_pfc_frame_reaches_the_cpu_as_packet_in_with_its_port_and_quanta(switch):
    """A PAUSE for priority 3 (quanta 0x1234) on port 2, then a RESUME on port 1: each comes to
    the controller as it arrived, with its ingress port and the PFC reason (not the postcard
    one), and is still counted; nothing is forwarded."""
    c = switch.p4rt
    basic_router(c)
    frames = []
    for quanta in (0x1234, 0):
        body = struct.pack("!HH8H", 0x0101, 1 << 3, *([0, 0, 0, quanta] + [0] * 4)) + b"\0" * 26
        frames.append(Ether(dst="01:80:c2:00:00:01", src="02:00:00:00:cc:01", type=0x8808)
                      / Raw(body))
    send_paced(switch.port(2), [frames[0]])
    send_paced(switch.port(1), [frames[1]])
    got = packet_ins(c, 2)
    assert len(got) == 2, "one packet-in per PFC frame"
    for pkt, port, quanta in zip(got, (2, 1), (0x1234, 0)):
        assert c.packet_in_metadata(pkt) == {"ingress_port": port, "reason": PACKET_IN_REASON_PFC}
        eth = Ether(pkt.payload)
        assert eth.type == 0x8808 and eth.dst == "01:80:c2:00:00:01"
        opcode, enable, *times = struct.unpack("!HH8H", bytes(eth.payload)[:20])
        assert (opcode, enable, times[3]) == (0x0101, 1 << 3, quanta)
    assert wait_for(lambda: c.counter("pfc_rx_pause_counter", 2 * 8 + 3)[0] == 1)
    assert c.counter("pfc_rx_resume_counter", 1 * 8 + 3)[0] == 1
    assert not any(switch.port(p).frames() for p in (1, 2, 3, 4))


def test_pfc_watchdog_drop_drops_only_that_port_and_priority_and_forward_restores(switch):
    c = switch.p4rt
    basic_router(c)
    classify(c, watchdog_ports=[2])
    route4(c, "10.0.2.0/24", nexthop=2)
    c.insert("pfc_watchdog_table", {"port": 2, "priority": TC_LOSSLESS}, "pfc_watchdog_drop")
    frames = [udp4(tos=DSCP_LOSSLESS << 2, sport=1)] * 5 + [udp4(tos=0, sport=2)] * 5
    send_paced(switch.port(1), frames)
    got = collect(switch, [2], 5)[2]
    assert [p[IP].payload.sport for p in got] == [2] * 5
    assert wait_for(lambda: c.counters("drop_reason_counter").get(DROP_PFC_WATCHDOG, (0,))[0]
                    == 5)
    pkts, _ = c.direct_counter("pfc_watchdog_table", {"port": 2, "priority": TC_LOSSLESS})
    assert pkts == 5
    c.modify("pfc_watchdog_table", {"port": 2, "priority": TC_LOSSLESS}, "pfc_watchdog_forward")
    switch.port(2).clear()
    send_paced(switch.port(1), [udp4(tos=DSCP_LOSSLESS << 2, sport=3)] * 5)
    got = collect(switch, [2], 5)[2]
    assert len(got) == 5
