#!/usr/bin/env python3
"""Reads a switch over P4Runtime (the `p4runtime` package only, no Weft code) and prints, as JSON,
the nexthop id whose `set_nexthop` leaves by --port-id, and the longest ipv4_table prefix
covering --dst with its action.

usage: p4rt_nexthop.py --addr 127.0.0.1:9561 --device-id 3 --p4info p4/build/weft.p4info.txtpb \
           --dst 10.0.0.18 --port-id 2

Reads need no arbitration. (The trace scenario then changes the route beneath P4Runtime with
BMv2's Thrift CLI: a second P4Runtime writer has to take mastership from the plugin, as BMv2's PI
has no roles, and the plugin's resync on regaining it repairs the change at once.)
"""
import argparse
import ipaddress
import json
import sys

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def as_int(b):
    return int.from_bytes(b, "big") if b else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", required=True)
    ap.add_argument("--device-id", type=int, required=True)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port-id", type=int, required=True)
    a = ap.parse_args()

    info = p4info_pb2.P4Info()
    with open(a.p4info) as f:
        text_format.Parse(f.read(), info)
    table = {t.preamble.name: t for t in info.tables}
    action = {x.preamble.name: x for x in info.actions}
    names = {x.preamble.id: x.preamble.name for x in info.actions}
    nh_action = next(x for n, x in action.items() if n.endswith(".set_nexthop"))
    egress_param = next(p.id for p in nh_action.params if p.name == "egress_port")
    stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(a.addr))

    def read(name):
        req = p4runtime_pb2.ReadRequest(device_id=a.device_id)
        req.entities.add().table_entry.table_id = table[name].preamble.id
        out = []
        for resp in stub.Read(req):
            out.extend(e.table_entry for e in resp.entities)
        return out

    dst = ipaddress.ip_address(a.dst)
    best = None
    for e in read("ingress.routing.ipv4_table"):
        m = e.match[0].lpm
        net = ipaddress.ip_network((as_int(m.value), m.prefix_len))
        if dst in net and (best is None or m.prefix_len > best[1].prefix_len):
            best = (e, net)
    nh_id = None
    for e in read("ingress.nexthop.nexthop_table"):
        params = {p.param_id: as_int(p.value) for p in e.action.action.params}
        if params.get(egress_param) == a.port_id:
            nh_id = as_int(e.match[0].exact.value)
            break
    if nh_id is None:
        sys.exit(f"p4rt_nexthop: no nexthop leaves by port {a.port_id}")
    route = None
    if best:
        act = best[0].action.action
        route = {"prefix": str(best[1]), "action": names.get(act.action_id, act.action_id),
                 "params": [as_int(p.value) for p in act.params]}
    print(json.dumps({"nexthop_id": nh_id, "port_id": a.port_id, "route": route}))


if __name__ == "__main__":
    main()
