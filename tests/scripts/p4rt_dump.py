#!/usr/bin/env python3
"""Independent read-back of a P4Runtime switch: every table entry, action-profile member and group,
printed as JSON with names resolved from the P4Info. Uses only the `p4runtime` and `grpcio` packages
from PyPI, so it shares no code with the project it checks.

usage: p4rt_dump.py --addr 127.0.0.1:9559 --p4info p4/build/weft.p4info.txtpb [--device-id 0] [--table NAME]
                   [--ca-cert CA.pem [--cert CLIENT.pem --key CLIENT.key] [--tls-domain NAME]]
Reads need no arbitration; nothing is written to the switch. A failed Read exits 3 with one line
on stderr: `p4rt_dump.py: Read failed: <gRPC status code>: <details>`. The tests run it with the pure-Python
protobuf runtime (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python), which p4runtime 1.6.0's
generated modules need on protobuf 5.
"""
import argparse
import json
import sys

import grpc
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def as_int(b):
    return int.from_bytes(b, "big") if b else 0


def load_p4info(path):
    info = p4info_pb2.P4Info()
    with open(path) as f:
        text_format.Parse(f.read(), info)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default="127.0.0.1:9559")
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--table", help="only this table (P4Info name)")
    ap.add_argument("--ca-cert", help="speak TLS, trusting this CA (PEM)")
    ap.add_argument("--cert", help="with --ca-cert: present this client certificate (PEM)")
    ap.add_argument("--key", help="with --cert: its private key (PEM)")
    ap.add_argument("--tls-domain", default="localhost",
                    help="with --ca-cert: the name the server certificate must carry")
    a = ap.parse_args()

    info = load_p4info(a.p4info)
    tables = {t.preamble.id: t for t in info.tables}
    actions = {x.preamble.id: x for x in info.actions}
    profiles = {p.preamble.id: p for p in info.action_profiles}

    if a.ca_cert:
        def pem(path):
            with open(path, "rb") as f:
                return f.read()
        creds = grpc.ssl_channel_credentials(
            root_certificates=pem(a.ca_cert),
            private_key=pem(a.key) if a.key else None,
            certificate_chain=pem(a.cert) if a.cert else None)
        channel = grpc.secure_channel(
            a.addr, creds, options=[("grpc.ssl_target_name_override", a.tls_domain)])
    else:
        channel = grpc.insecure_channel(a.addr)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    req = p4runtime_pb2.ReadRequest(device_id=a.device_id)
    wanted = [t for t in tables.values() if not a.table or t.preamble.name == a.table]
    if a.table and not wanted:
        sys.exit(f"p4rt_dump.py: no table named {a.table} in {a.p4info}")
    for t in wanted:
        req.entities.add().table_entry.table_id = t.preamble.id
    if not a.table:
        for p in profiles.values():
            req.entities.add().action_profile_member.action_profile_id = p.preamble.id
            req.entities.add().action_profile_group.action_profile_id = p.preamble.id

    def action_json(act):
        ad = actions.get(act.action_id)
        names = {p.id: p.name for p in ad.params} if ad else {}
        return {"action": ad.preamble.name if ad else act.action_id,
                "params": {names.get(p.param_id, p.param_id): as_int(p.value) for p in act.params}}

    out = {"tables": {}, "members": {}, "groups": {}}
    try:
        responses = list(stub.Read(req, timeout=30))
    except grpc.RpcError as e:
        # One line a caller can match: the status code, then gRPC's details.
        sys.stderr.write(f"p4rt_dump.py: Read failed: {e.code().name}: {e.details()}\n")
        sys.exit(3)
    for resp in responses:
        for e in resp.entities:
            kind = e.WhichOneof("entity")
            if kind == "table_entry":
                te = e.table_entry
                td = tables[te.table_id]
                fields = {f.id: f.name for f in td.match_fields}
                match = {}
                for m in te.match:
                    k = m.WhichOneof("field_match_type")
                    v = getattr(m, k)
                    name = fields.get(m.field_id, m.field_id)
                    if k == "exact":
                        match[name] = as_int(v.value)
                    elif k == "lpm":
                        match[name] = [as_int(v.value), v.prefix_len]
                    elif k == "ternary":
                        match[name] = [as_int(v.value), as_int(v.mask)]
                    elif k == "range":
                        match[name] = [as_int(v.low), as_int(v.high)]
                    elif k == "optional":
                        match[name] = as_int(v.value)
                row = {"match": match, "priority": te.priority}
                ak = te.action.WhichOneof("type")
                if ak == "action":
                    row.update(action_json(te.action.action))
                elif ak == "action_profile_member_id":
                    row["member"] = te.action.action_profile_member_id
                elif ak == "action_profile_group_id":
                    row["group"] = te.action.action_profile_group_id
                elif ak == "action_profile_action_set":
                    row["action_set"] = [dict(action_json(x.action), weight=x.weight,
                                              watch_port=as_int(x.watch_port))
                                         for x in te.action.action_profile_action_set.action_profile_actions]
                out["tables"].setdefault(td.preamble.name, []).append(row)
            elif kind == "action_profile_member":
                m = e.action_profile_member
                pn = profiles[m.action_profile_id].preamble.name
                out["members"].setdefault(pn, {})[m.member_id] = action_json(m.action)
            elif kind == "action_profile_group":
                g = e.action_profile_group
                pn = profiles[g.action_profile_id].preamble.name
                out["groups"].setdefault(pn, {})[g.group_id] = [
                    {"member": x.member_id, "weight": x.weight, "watch_port": as_int(x.watch_port)}
                    for x in g.members]
    for rows in out["tables"].values():
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
