"""Checks that need no BMv2: the values the tests restate agree with p4/include/constants.p4,
and the committed P4Info names what the tests (and the README) use."""
import os
import re

import fabric
from weft_p4rt import P4Info

P4_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def p4_constants():
    out = {}
    with open(os.path.join(P4_DIR, "include", "constants.p4")) as f:
        for line in f:
            m = re.match(r"\s*const bit<\d+> (\w+) = (0x[0-9a-fA-F]+|\d+);", line)
            if m:
                out[m.group(1)] = int(m.group(2), 0)
    return out


def test_test_constants_match_the_p4_source():
    c = p4_constants()
    pairs = {
        "MODE_HASH": "MULTIPATH_MODE_HASH", "MODE_SPRAY": "MULTIPATH_MODE_SPRAY",
        "MODE_ADAPTIVE": "MULTIPATH_MODE_ADAPTIVE", "MODE_FLOWLET": "MULTIPATH_MODE_FLOWLET",
        "MODE_ENTROPY": "MULTIPATH_MODE_ENTROPY",
        "DROP_TTL_EXPIRED": "DROP_REASON_TTL_EXPIRED", "DROP_NO_ROUTE": "DROP_REASON_NO_ROUTE",
        "DROP_ROUTER_MAC_MISMATCH": "DROP_REASON_ROUTER_MAC_MISMATCH",
        "DROP_NO_LIVE_MEMBER": "DROP_REASON_NO_LIVE_MEMBER",
        "DROP_EGRESS_PORT_DOWN": "DROP_REASON_EGRESS_PORT_DOWN",
        "DROP_PFC_WATCHDOG": "DROP_REASON_PFC_WATCHDOG",
        "PFC_CLONE_SESSION_BASE": "PFC_CLONE_SESSION_BASE", "CPU_PORT": "CPU_PORT",
        "ETHERTYPE_POSTCARD": "ETHERTYPE_POSTCARD",
        "PACKET_IN_REASON_POSTCARD": "PACKET_IN_REASON_POSTCARD",
        "PACKET_IN_REASON_PFC": "PACKET_IN_REASON_PFC",
    }
    for ours, theirs in pairs.items():
        assert getattr(fabric, ours) == c[theirs], ours


def test_every_table_in_the_p4info_is_documented_in_the_readme():
    info = P4Info(os.path.join(P4_DIR, "build", "weft.p4info.txtpb")).info
    with open(os.path.join(P4_DIR, "README.md")) as f:
        readme = f.read()
    names = [t.preamble.name for t in info.tables] + [c.preamble.name for c in info.counters]
    names += [c.preamble.name for c in info.direct_counters]
    names += [p.preamble.name for p in info.action_profiles]
    missing = [n for n in names if n not in readme]
    assert not missing, f"README.md does not document {missing}"
