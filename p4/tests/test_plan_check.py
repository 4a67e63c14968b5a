"""The independent plan check (tests/scripts/p4rt_plan_check.py) the BMv2 tests hold switches to:
it passes a switch that holds exactly the plan's entries and fails, naming the entry, one with a
wrong parameter, a wrong port, a group member's wrong weight, an entry missing or one too many.
No switch needed: the dumps are written here in p4rt_dump.py's form."""
import copy
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHECK = os.path.join(REPO, "tests", "scripts", "p4rt_plan_check.py")
P4INFO = os.path.join(REPO, "p4", "build", "weft.p4info.txtpb")

ENTRIES = [
    {"key": 'FIXED_NEXTHOP_TABLE:{"match/nexthop_id":"0x1"}',
     "fields": [["action", "set_nexthop"], ["param/egress_port", "Ethernet0"],
                ["param/dst_mac", "02:00:00:00:00:01"], ["param/src_mac", "02:00:00:00:00:aa"]]},
    {"key": 'FIXED_WCMP_GROUP_TABLE:{"match/wcmp_group_id":"0x7"}',
     "fields": [["actions", json.dumps([
         {"action": "set_wcmp_member", "param/nexthop_id": "0x1",
          "param/egress_port": "Ethernet0", "weight": 1},
         {"action": "set_wcmp_member", "param/nexthop_id": "0x2",
          "param/egress_port": "Ethernet4", "weight": 2}])]]},
    {"key": 'FIXED_IPV4_TABLE:{"match/ipv4_dst":"10.1.0.0/16"}',
     "fields": [["action", "set_wcmp_group_id"], ["param/wcmp_group_id", "0x7"]]},
]

HELD = {
    "tables": {
        "ingress.nexthop.nexthop_table": [
            {"match": {"nexthop_id": 1}, "priority": 0, "action": "ingress.nexthop.set_nexthop",
             "params": {"egress_port": 1, "dst_mac": 0x020000000001, "src_mac": 0x0200000000AA}}],
        "ingress.multipath.wcmp_group_table": [
            {"match": {"wcmp_group_id": 7}, "priority": 0, "group": 7}],
        "ingress.routing.ipv4_table": [
            {"match": {"ipv4_dst": [0x0A010000, 16]}, "priority": 0,
             "action": "ingress.routing.set_wcmp_group_id", "params": {"wcmp_group_id": 7}}],
        # A table the plugin writes itself: not the plan's, not compared.
        "egress.port.queue_config_table": [{"match": {"port": 1}, "priority": 0}],
    },
    "members": {"ingress.multipath.wcmp_group_selector": {
        "1792": {"action": "ingress.multipath.set_wcmp_member",
                 "params": {"nexthop_id": 1, "egress_port": 1}},
        "1793": {"action": "ingress.multipath.set_wcmp_member",
                 "params": {"nexthop_id": 2, "egress_port": 2}}}},
    "groups": {"ingress.multipath.wcmp_group_selector": {
        "7": [{"member": 1792, "weight": 1, "watch_port": 0},
              {"member": 1793, "weight": 2, "watch_port": 0}]}},
}


def check(tmp_path, held):
    entries, dump = tmp_path / "entries.json", tmp_path / "dump.json"
    entries.write_text(json.dumps(ENTRIES))
    dump.write_text(json.dumps(held))
    r = subprocess.run([sys.executable, CHECK, "--p4info", P4INFO, "--entries", str(entries),
                        "--dump", str(dump), "--ports", "Ethernet0=1,Ethernet4=2"],
                       capture_output=True, text=True)
    return r.returncode, json.loads(r.stdout) if r.stdout else r.stderr


def test_a_switch_holding_exactly_the_plan_passes(tmp_path):
    code, out = check(tmp_path, HELD)
    assert code == 0, out
    assert out["compared"] == {"expected": 4, "held": 4}


def mutated(f):
    h = copy.deepcopy(HELD)
    f(h)
    return h


def test_every_kind_of_difference_fails_and_names_the_entry(tmp_path):
    t = HELD["tables"]
    cases = {
        "a wrong MAC": lambda h: h["tables"]["ingress.nexthop.nexthop_table"][0]["params"]
        .update(dst_mac=0x020000000002),
        "a wrong port": lambda h: h["tables"]["ingress.nexthop.nexthop_table"][0]["params"]
        .update(egress_port=2),
        "a member's wrong weight": lambda h: h["groups"]["ingress.multipath.wcmp_group_selector"]
        ["7"][1].update(weight=1),
        "a member's wrong nexthop": lambda h: h["members"]["ingress.multipath.wcmp_group_selector"]
        ["1793"]["params"].update(nexthop_id=3),
        "a route missing": lambda h: h["tables"]["ingress.routing.ipv4_table"].clear(),
        "a route too many": lambda h: h["tables"]["ingress.routing.ipv4_table"].append(
            dict(t["ingress.routing.ipv4_table"][0], match={"ipv4_dst": [0x0A020000, 16]})),
        "a member in no group": lambda h: h["members"]["ingress.multipath.wcmp_group_selector"]
        .update({"1794": {"action": "ingress.multipath.set_wcmp_member",
                          "params": {"nexthop_id": 1, "egress_port": 1}}}),
    }
    for what, f in cases.items():
        code, out = check(tmp_path, mutated(f))
        assert code == 1, f"{what}: passed: {out}"
        assert out["missing"] or out["unexpected"], what
