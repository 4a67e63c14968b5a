"""Router basics on BMv2: admission, LPM for IPv4 and IPv6, nexthop rewrites, TTL, counters,
packet-out."""
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from fabric import (DROP_NO_ROUTE, DROP_ROUTER_MAC_MISMATCH, DROP_TTL_EXPIRED, basic_router,
                    collect, mac_str, neighbor_mac, route4, route6, router_mac, send_paced, udp4,
                    udp6, wait_for)


def test_ipv4_packet_is_routed_with_mac_rewrite_ttl_decrement_and_valid_checksum(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    send_paced(switch.port(1), [udp4(dst="10.0.2.7", ttl=64)] * 5)
    got = collect(switch, [2, 3, 4], 5)
    assert len(got[2]) == 5 and not got[3] and not got[4]
    for p in got[2]:
        assert p[Ether].dst == mac_str(neighbor_mac(2))
        assert p[Ether].src == mac_str(router_mac(2))
        assert p[IP].ttl == 63
        sent_chk = p[IP].chksum
        del p[IP].chksum
        assert IP(bytes(p[IP]))[IP].chksum == sent_chk, "IPv4 checksum not recomputed"


def test_longest_prefix_wins_and_directly_attached_host_routes_work(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.0.0/8", nexthop=2)
    route4(c, "10.0.3.0/24", nexthop=3)
    route4(c, "10.0.3.9/32", nexthop=4)  # a directly attached host
    send_paced(switch.port(1), [udp4(dst="10.9.9.9"), udp4(dst="10.0.3.1"), udp4(dst="10.0.3.9")])
    got = collect(switch, [2, 3, 4], 3)
    assert [len(got[p]) for p in (2, 3, 4)] == [1, 1, 1]
    assert got[2][0][IP].dst == "10.9.9.9"
    assert got[3][0][IP].dst == "10.0.3.1"
    assert got[4][0][IP].dst == "10.0.3.9"
    assert got[4][0][Ether].dst == mac_str(neighbor_mac(4))


def test_ipv6_packet_is_routed_with_hop_limit_decrement(switch):
    c = switch.p4rt
    basic_router(c)
    route6(c, "2001:db8:2::/48", nexthop=3)
    send_paced(switch.port(1), [udp6(dst="2001:db8:2::5", hlim=10)] * 3)
    got = collect(switch, [2, 3, 4], 3)
    assert len(got[3]) == 3 and not got[2] and not got[4]
    for p in got[3]:
        assert p[IPv6].hlim == 9
        assert p[Ether].dst == mac_str(neighbor_mac(3))
        assert p[Ether].src == mac_str(router_mac(3))


def test_ttl_one_is_dropped_and_counted_as_ttl_expired(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    route6(c, "2001:db8:2::/48", nexthop=2)
    send_paced(switch.port(1), [udp4(ttl=1)] * 4 + [udp6(hlim=1)] * 2 + [udp4(ttl=2)])
    got = collect(switch, [2], 1)
    assert len(got[2]) == 1 and got[2][0][IP].ttl == 1  # only the TTL-2 packet
    pkts = wait_for(lambda: c.counters("drop_reason_counter").get(DROP_TTL_EXPIRED, (0, 0))[0]
                    >= 6)
    assert pkts, c.counters("drop_reason_counter")
    assert c.counters("drop_reason_counter")[DROP_TTL_EXPIRED][0] == 6


def test_wrong_router_mac_and_missing_route_are_dropped_and_counted_by_reason(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    frames = [udp4(dst_mac=0x02AABBCCDDEE)] * 3 + [udp4(dst="192.168.1.1")] * 2
    send_paced(switch.port(1), frames)
    ok = wait_for(lambda: sum(v[0] for v in c.counters("drop_reason_counter").values()) >= 5)
    drops = c.counters("drop_reason_counter")
    assert ok, drops
    assert drops[DROP_ROUTER_MAC_MISMATCH][0] == 3
    assert drops[DROP_NO_ROUTE][0] == 2
    assert not any(switch.port(p).frames() for p in (2, 3, 4))


def test_port_rx_and_tx_counters_count_packets_and_bytes(switch):
    c = switch.p4rt
    basic_router(c)
    route4(c, "10.0.2.0/24", nexthop=2)
    frame = udp4()
    send_paced(switch.port(1), [frame] * 7)
    collect(switch, [2], 7)
    ok = wait_for(lambda: c.counter("port_tx_counter", 2)[0] >= 7)
    assert ok
    rx = c.counter("port_rx_counter", 1)
    tx = c.counter("port_tx_counter", 2)
    assert rx == (7, 7 * len(bytes(frame)))
    assert tx == (7, 7 * len(bytes(frame)))


def test_packet_out_leaves_on_the_named_port_unchanged(switch):
    c = switch.p4rt
    frame = bytes(Ether(dst="02:00:00:00:00:99", src=HOST) / IP(dst="1.2.3.4") / UDP()
                  / b"packet-out")
    c.packet_out(frame, 3)
    got = collect(switch, [1, 2, 3, 4], 1)
    assert [bytes(p) for p in got[3]] == [frame]
    assert not got[1] and not got[2] and not got[4]


HOST = "02:00:00:00:cc:09"
