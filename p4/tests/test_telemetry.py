"""Reordering awareness (RoCE PSN tracking) and telemetry postcards on BMv2."""
import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from fabric import (CPU_PORT, ETHERTYPE_POSTCARD, PACKET_IN_REASON_POSTCARD, basic_router,
                    collect, ip4, packet_ins, roce4, route4, send_paced, switch_config, udp4,
                    wait_for)

def parse_postcard(payload):
    """(fields, rest) of Ethernet payload bytes that start with a postcard header (40 bytes)."""
    (version, flags, next_type, switch_id, in_port, out_port, queue, _r, _r2, enq_qdepth,
     deq_timedelta) = struct.unpack("!BBHIHHBBHII", payload[:24])
    ingress_ts = int.from_bytes(payload[24:30], "big")
    egress_ts = int.from_bytes(payload[30:36], "big")
    (flow_hash,) = struct.unpack("!I", payload[36:40])
    return dict(version=version, flags=flags, next_type=next_type, switch_id=switch_id,
                ingress_port=in_port, egress_port=out_port, queue=queue,
                enq_qdepth=enq_qdepth, deq_timedelta=deq_timedelta, ingress_ts=ingress_ts,
                egress_ts=egress_ts, flow_hash=flow_hash), payload[40:]


def psn_totals(c):
    ooo = sum(v[0] for v in c.counters("psn_out_of_order_counter").values())
    reg = sum(v[0] for v in c.counters("psn_regression_counter").values())
    return ooo, reg


def test_psn_tracking_counts_one_gap_and_one_regression_and_nothing_for_in_order_qps(switch):
    """QP 0x11 arrives 1 2 3 5 6 4 7: PSN 5 skips 4 (out of order), 4 comes after 6
    (regression). QP 0x22 arrives 1..7 in order: no anomaly."""
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    c.insert("psn_tracking_table", {"port": 2}, "enable_psn_tracking")
    frames = [roce4(dst_qp=0x11, psn=p) for p in (1, 2, 3, 5, 6, 4, 7)]
    frames += [roce4(dst_qp=0x22, psn=p) for p in range(1, 8)]
    send_paced(switch.port(1), frames)
    got = collect(switch, [2], len(frames))[2]
    assert len(got) == len(frames)
    assert wait_for(lambda: psn_totals(c) == (1, 1), timeout=5), psn_totals(c)


def test_psn_anomalies_are_counted_at_the_egress_port_of_the_host_they_go_to(switch):
    """Two hosts behind ports 2 and 3: the gap and the regression toward 10.0.3.1 are counted in
    port 3's cell only, the in-order QP toward 10.0.2.1 leaves port 2's cell at zero: the switch
    says which host sees reordering, whatever else it sends."""
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    route4(c, "10.0.3.0/24", nexthop=3)
    for p in (2, 3):
        c.insert("psn_tracking_table", {"port": p}, "enable_psn_tracking")
    frames = [roce4(dst="10.0.3.1", dst_qp=0x11, psn=p) for p in (1, 2, 3, 5, 6, 4, 7)]
    frames += [roce4(dst="10.0.2.1", dst_qp=0x11, psn=p) for p in range(1, 15)]
    send_paced(switch.port(1), frames)
    got = collect(switch, [2, 3], len(frames))
    assert (len(got[2]), len(got[3])) == (14, 7)
    ooo = lambda p: c.counter("psn_out_of_order_counter", p)[0]  # noqa: E731
    reg = lambda p: c.counter("psn_regression_counter", p)[0]  # noqa: E731
    assert wait_for(lambda: (ooo(3), reg(3)) == (1, 1), timeout=5), (ooo(3), reg(3))
    assert (ooo(2), reg(2)) == (0, 0)
    assert psn_totals(c) == (1, 1)


def test_acks_and_cnps_are_not_tracked_though_their_psns_skip_ahead(switch):
    """Coalesced ACKs (opcode 0x11) carry the PSN they acknowledge, 16 apart, and CNPs (0x81)
    carry none that counts: neither is a reordered packet. Data (RDMA WRITE, 0x0a) that skips is."""
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    c.insert("psn_tracking_table", {"port": 2}, "enable_psn_tracking")
    frames = [roce4(dst_qp=0x11, psn=p, opcode=0x11) for p in (16, 32, 48, 64, 40)]
    frames += [roce4(dst_qp=0x11, psn=p, opcode=0x81) for p in (0, 7, 3)]
    frames += [roce4(dst_qp=0x33, psn=p, opcode=0x0a) for p in (1, 3)]
    send_paced(switch.port(1), frames)
    assert len(collect(switch, [2], len(frames))[2]) == len(frames)
    assert wait_for(lambda: psn_totals(c) == (1, 0), timeout=5), psn_totals(c)


def test_psn_tracking_is_off_on_ports_without_an_entry(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    send_paced(switch.port(1), [roce4(psn=p) for p in (1, 5, 2)])
    assert len(collect(switch, [2], 3)[2]) == 3
    assert psn_totals(c) == (0, 0)


def setup_postcards(c, session, ports, sample_n=0, classes=None):
    switch_config(c, classes=classes, switch_id=0xABCD, sample_n=sample_n, session=session)
    c.clone_session(session, ports)


def test_watched_flow_sends_a_postcard_packet_in_with_sane_fields(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    setup_postcards(c, 100, [CPU_PORT], classes={26: (3, False)})
    c.insert("postcard_watch_table",
             {"ip_protocol": (17, 0xFF), "l4_dst_port": (9999, 0xFFFF),
              "dst_addr": (ip4("10.0.2.1"), (1 << 128) - 1)},
             "watch_postcard", priority=1)
    frames = [udp4(dst="10.0.2.1", dport=9999, tos=26 << 2)] * 3
    frames += [udp4(dst="10.0.2.1", dport=8888, tos=26 << 2)] * 3
    send_paced(switch.port(1), frames)
    assert len(collect(switch, [2], 6)[2]) == 6, "the originals are still forwarded"
    cards = packet_ins(c, 3)
    assert len(cards) == 3, "one postcard per watched packet, none for the others"
    for pkt in cards:
        meta = c.packet_in_metadata(pkt)
        assert meta == {"ingress_port": 1, "reason": PACKET_IN_REASON_POSTCARD}
        eth = Ether(pkt.payload[:14])
        assert eth.type == ETHERTYPE_POSTCARD
        card, rest = parse_postcard(pkt.payload[14:])
        assert card["version"] == 1 and card["flags"] == 1
        assert card["switch_id"] == 0xABCD
        assert (card["ingress_port"], card["egress_port"], card["queue"]) == (1, 2, 3)
        assert card["next_type"] == 0x0800
        assert 0 < card["ingress_ts"] <= card["egress_ts"]
        assert card["flow_hash"] != 0
        inner = IP(rest)
        assert inner.dst == "10.0.2.1" and inner[UDP].dport == 9999
        assert len(pkt.payload) <= 160


def test_one_in_one_sampling_clones_a_postcard_of_every_packet_to_the_collector_port(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    setup_postcards(c, 101, [4], sample_n=1)
    send_paced(switch.port(1), [udp4(sport=100 + i) for i in range(10)])
    got = collect(switch, [2, 4], 20)
    assert len(got[2]) == 10
    cards = [p for p in got[4] if p[Ether].type == ETHERTYPE_POSTCARD]
    assert len(cards) == 10
    sports = set()
    for p in cards:
        card, rest = parse_postcard(bytes(p[Ether].payload))
        assert card["flags"] == 2 and card["egress_port"] == 2 and card["ingress_port"] == 1
        sports.add(IP(rest)[UDP].sport)
    assert sports == {100 + i for i in range(10)}
    # Postcards are counted as transmitted on the collector port.
    assert wait_for(lambda: c.counter("port_tx_counter", 4)[0] == 10)
