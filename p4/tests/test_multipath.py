"""Multipath groups on BMv2: hash ECMP, WCMP weights, spray, adaptive (least queue), flowlets,
fast failover through the port-status mask and through P4Runtime watch ports, all-down drop."""
import time

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from fabric import (DROP_NO_LIVE_MEMBER, MODE_ADAPTIVE, MODE_FLOWLET, MODE_HASH, MODE_SPRAY,
                    basic_router, clear, collect, flow_hash4, hash_member, route4, send_paced,
                    set_down_ports, switch_config, udp4, wait_for, wcmp_group)

MEMBERS = [2, 3]


def spread(got):
    return {p: len(v) for p, v in got.items()}


def test_hash_ecmp_spreads_300_flows_within_tolerance_and_keeps_each_flow_on_one_path(switch):
    """300 flows over 2 equal members: each member gets 35%..65% (binomial sd is 2.9%, so this
    is > 5 sd); the 20 packets of one flow all take one member."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_HASH)
    route4(c, "10.0.2.0/24", group=1)
    send_paced(switch.port(1), [udp4(sport=10000 + i) for i in range(300)])
    got = spread(collect(switch, MEMBERS, 300))
    assert sum(got.values()) == 300, got
    for p in MEMBERS:
        assert 105 <= got[p] <= 195, got
    clear(switch)
    send_paced(switch.port(1), [udp4(sport=4242)] * 20)
    got = spread(collect(switch, MEMBERS, 20))
    assert sorted(got.values()) == [0, 20], got
    # The per-member counters tell the same spread.
    counts = c.counters("multipath_member_counter")
    assert counts[2][0] + counts[3][0] == 320


def test_wcmp_weights_3_to_1_give_a_3_to_1_spread(switch):
    """400 flows, weights 3:1 -> member 2 carries 65%..85% (expected 75%, sd 2.2%)."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 3), (3, 1)], mode=MODE_HASH)
    route4(c, "10.0.2.0/24", group=1)
    send_paced(switch.port(1), [udp4(sport=20000 + i) for i in range(400)])
    got = spread(collect(switch, MEMBERS, 400))
    assert sum(got.values()) == 400, got
    assert 260 <= got[2] <= 340, got


def test_spray_spreads_one_flow_packet_by_packet(switch):
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_SPRAY)
    route4(c, "10.0.2.0/24", group=1)
    send_paced(switch.port(1), [udp4(sport=5555)] * 200)
    got = spread(collect(switch, MEMBERS, 200))
    assert sum(got.values()) == 200, got
    for p in MEMBERS:
        assert 60 <= got[p] <= 140, got


@pytest.mark.parametrize("mode", [MODE_HASH, MODE_SPRAY, MODE_ADAPTIVE, MODE_FLOWLET])
def test_member_marked_down_in_port_status_is_skipped_at_once_in_every_mode(switch, mode):
    """The plugin's down mask alone (no group change, no controller) moves all traffic to the
    live member; clearing it brings the member back."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=mode, gap_us=50_000)
    route4(c, "10.0.2.0/24", group=1)
    set_down_ports(c, [2])
    send_paced(switch.port(1), [udp4(sport=30000 + i) for i in range(100)])
    got = spread(collect(switch, MEMBERS, 100))
    # Nothing ever goes to the dead member. Only the group's first packets, before it has a
    # memory of a live member, can draw the dead member five times over (p = 3% each).
    assert got[2] == 0 and got[3] >= 98, got
    drops = c.counters("drop_reason_counter")
    assert set(drops) <= {DROP_NO_LIVE_MEMBER} and got[3] + sum(v[0] for v in drops.values()) \
        == 100, drops
    set_down_ports(c, [])
    clear(switch)
    time.sleep(0.1)  # flowlet gap of the previous burst
    send_paced(switch.port(1), [udp4(sport=31000 + i) for i in range(100)])
    got = spread(collect(switch, MEMBERS, 100))
    assert sum(got.values()) == 100 and got[2] > 0, got


def test_all_members_down_drops_and_counts_no_live_member(switch):
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_HASH)
    route4(c, "10.0.2.0/24", group=1)
    set_down_ports(c, [2, 3])
    send_paced(switch.port(1), [udp4(sport=40000 + i) for i in range(10)])
    ok = wait_for(lambda: c.counters("drop_reason_counter").get(DROP_NO_LIVE_MEMBER, (0,))[0]
                  >= 10)
    assert ok, c.counters("drop_reason_counter")
    assert not switch.port(2).frames() and not switch.port(3).frames()


def test_watch_port_failover_by_bmv2_port_status_moves_traffic_and_brings_it_back(switch):
    """Action-profile members with watch_port: when the link of port 2 fails (far end down),
    BMv2's port poll tells PI, which deactivates that member, so no flow uses it and all arrive
    on ports 3 and 4; when the link returns, the member carries flows again."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1), (4, 1)], mode=MODE_HASH, watch=True)
    route4(c, "10.0.2.0/24", group=1)
    flows = [udp4(sport=50000 + i) for i in range(60)]

    def round_on(ports):
        clear(switch)
        send_paced(switch.port(1), flows)
        return spread(collect(switch, ports, 60, timeout=5))

    # All up: every member carries flows. (Observed: PI applies watch ports only once the new
    # pipeline has processed a packet, so traffic flows before the failure, as in real life.)
    got = round_on([2, 3, 4])
    assert sum(got.values()) == 60 and min(got.values()) > 0, got
    switch.bmv2.set_link(2, up=False)
    # BMv2 notices within its 200 ms poll; probe until no flow is lost to port 2.
    got = wait_for(lambda: (lambda g: g if g[3] + g[4] == 60 else None)(round_on([3, 4])),
                   timeout=20, step=0.2)
    assert got and got[3] > 0 and got[4] > 0, got
    switch.bmv2.set_link(2, up=True)
    got = wait_for(lambda: (lambda g: g if g[2] > 0 else None)(round_on([2, 3, 4])),
                   timeout=20, step=0.2)
    assert got and sum(got.values()) == 60, "member on port 2 never came back"


def test_adaptive_sends_to_the_shorter_queue(switch):
    """Port 2 is rate-limited to 20 pps and pre-loaded with a queue; adaptive traffic to the
    group then goes (almost) all to port 3, whose queue is empty."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_ADAPTIVE)
    route4(c, "10.0.2.0/24", group=1)
    route4(c, "10.0.9.0/24", nexthop=2)  # direct route used to build port 2's queue
    switch.set_queue_rate(2, 20)
    send_paced(switch.port(1), [udp4(dst="10.0.9.1", sport=7)] * 40, gap=0.001)
    # Wait until port 2 has sent a few (its depth samples are taken at dequeue).
    assert wait_for(lambda: len(switch.port(2).frames()) >= 3, timeout=10)
    clear(switch)
    send_paced(switch.port(1), [udp4(sport=60000 + i) for i in range(100)], gap=0.002)

    def adaptive_received():
        on2 = sum(1 for f in switch.port(2).frames() if UDP in Ether(f)
                  and Ether(f)[UDP].sport >= 60000)
        return on2, len(switch.port(3).frames())

    wait_for(lambda: sum(adaptive_received()) >= 100, timeout=30)
    on_2, on_3 = adaptive_received()
    assert on_2 + on_3 == 100, {"port2": on_2, "port3": on_3}
    assert on_3 >= 90, {"port2": on_2, "port3": on_3}


def test_flowlet_keeps_the_member_within_the_gap_and_may_move_after_it(switch):
    """Gap 300 ms. Bursts of 20 packets 2 ms apart stay on one member each; after idle periods
    longer than the gap the flow is re-placed, and over 12 bursts it uses both members."""
    c = switch.p4rt
    basic_router(c)
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_FLOWLET, gap_us=300_000)
    route4(c, "10.0.2.0/24", group=1)
    used = set()
    for burst in range(12):
        clear(switch)
        send_paced(switch.port(1), [udp4(sport=777)] * 20)
        got = spread(collect(switch, MEMBERS, 20))
        assert sum(got.values()) == 20, (burst, got)
        assert sorted(got.values()) == [0, 20], ("flowlet split inside the gap", burst, got)
        used.add(2 if got[2] else 3)
        if len(used) == 2 and burst >= 3:
            break
        time.sleep(0.6)
    assert used == {2, 3}, "flow never moved after a gap"


def test_mode_per_traffic_class_overrides_the_group_default(switch):
    """Group default HASH (wildcard class); class 3 (DSCP 26) SPRAY: the same flow stays on one
    member in class 0 and spreads packet by packet in class 3."""
    c = switch.p4rt
    basic_router(c)
    switch_config(c, classes={26: (3, False)})
    wcmp_group(c, 1, [(2, 1), (3, 1)], mode=MODE_HASH)
    c.insert("multipath_mode_table", {"wcmp_group_id": 1, "traffic_class": (3, 0x7)},
             "set_multipath_mode", {"mode": MODE_SPRAY, "flowlet_gap_us": 0, "epoch": 1},
             priority=20)
    route4(c, "10.0.2.0/24", group=1)
    send_paced(switch.port(1), [udp4(sport=999, tos=0)] * 60)
    got = spread(collect(switch, MEMBERS, 60))
    assert sorted(got.values()) == [0, 60], got
    clear(switch)
    send_paced(switch.port(1), [udp4(sport=999, tos=26 << 2)] * 100)
    got = spread(collect(switch, MEMBERS, 100))
    assert sum(got.values()) == 100 and min(got.values()) >= 20, got


def test_two_switches_with_different_hash_seeds_spread_the_same_flows_differently(switch,
                                                                                 switch2):
    """The same 200 flows through two switches with the same group: with different seeds each
    switch still keeps every flow on one member and splits evenly, but their picks agree only
    as often as chance has it (about half the flows, where equal seeds agree on all: the
    polarisation seeds exist to break); every pick is the one the hash formula (and
    weft-simulate's model) predicts, bit for bit. Equal seeds then agree on every flow."""
    seeds = {1: 0x2545F491, 2: 0x9E3779B9}
    sports = [20000 + 7 * i for i in range(200)]

    def picks(sw):
        clear(sw)
        send_paced(sw.port(1), [udp4(sport=s) for s in sports])
        got = collect(sw, MEMBERS, len(sports))
        by_flow = {}
        for port, frames in got.items():
            for f in frames:
                by_flow.setdefault(f[UDP].sport, set()).add(port)
        assert sorted(by_flow) == sorted(sports), "lost or extra flows"
        assert all(len(v) == 1 for v in by_flow.values()), "a flow took two paths"
        return {s: v.pop() for s, v in by_flow.items()}

    for i, sw in ((1, switch), (2, switch2)):
        basic_router(sw.p4rt)
        switch_config(sw.p4rt, hash_seed=seeds[i])
        wcmp_group(sw.p4rt, 1, [(2, 1), (3, 1)], mode=MODE_HASH)
        route4(sw.p4rt, "10.0.2.0/24", group=1)
    a, b = picks(switch), picks(switch2)
    for sw_picks, seed in ((a, seeds[1]), (b, seeds[2])):
        on_2 = sum(1 for p in sw_picks.values() if p == 2)
        assert 70 <= on_2 <= 130, on_2  # 35%..65%: > 4 sd of a fair split
        for s, port in sw_picks.items():
            h = flow_hash4("10.0.1.1", "10.0.2.1", 17, s, 2000)
            assert MEMBERS[hash_member(h, seed, 2)] == port, (s, seed)
    agree = sum(1 for s in sports if a[s] == b[s])
    # Independent picks agree on 100 +- 7 flows; correlated (polarised) ones on all 200.
    assert 60 <= agree <= 140, agree
    switch_config(switch2.p4rt, hash_seed=seeds[1])
    assert picks(switch2) == a
