#!/usr/bin/env python3
"""Removes (and restores) one route directly on a P4Runtime switch, behind its controller's back,
the way a stray script or a buggy agent would: `weft testbed fault FILE blackhole SW PREFIX`.

  p4rt_route.py --addr 127.0.0.1:9559 --device-id 1 --table-id ID --field-id ID list
  p4rt_route.py ... delete 10.0.0.24/29 --save entry.txtpb
  p4rt_route.py ... restore entry.txtpb

Writes carry the primary's election id (--election-id, the plugin's): P4Runtime accepts a write
from any client that names the primary's id, so the plugin keeps its session and does not notice.
Uses only the `p4runtime` and `grpcio` packages from PyPI.
"""
import argparse
import ipaddress
import json
import sys

import grpc
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc


def as_int(b):
    return int.from_bytes(b, "big") if b else 0


def entries(stub, a):
    req = p4runtime_pb2.ReadRequest(device_id=a.device_id)
    req.entities.add().table_entry.table_id = a.table_id
    for resp in stub.Read(req):
        for e in resp.entities:
            yield e


def prefix_of(e, field_id):
    for m in e.table_entry.match:
        if m.field_id == field_id and m.WhichOneof("field_match_type") == "lpm":
            return ipaddress.ip_network((as_int(m.lpm.value), m.lpm.prefix_len))
    return None


def write(stub, a, kind, entity):
    req = p4runtime_pb2.WriteRequest(device_id=a.device_id)
    req.election_id.low = a.election_id
    u = req.updates.add()
    u.type = kind
    u.entity.CopyFrom(entity)
    stub.Write(req)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", default="127.0.0.1:9559")
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--election-id", type=int, default=1)
    ap.add_argument("--table-id", type=int, required=True)
    ap.add_argument("--field-id", type=int, required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    d = sub.add_parser("delete")
    d.add_argument("prefix")
    d.add_argument("--save", required=True)
    r = sub.add_parser("restore")
    r.add_argument("file")
    a = ap.parse_args()
    stub = p4runtime_pb2_grpc.P4RuntimeStub(grpc.insecure_channel(a.addr))
    if a.cmd == "list":
        json.dump(sorted(str(p) for p in (prefix_of(e, a.field_id) for e in entries(stub, a)) if p),
                  sys.stdout)
        print()
    elif a.cmd == "delete":
        want = ipaddress.ip_network(a.prefix, strict=False)
        for e in entries(stub, a):
            if prefix_of(e, a.field_id) == want:
                with open(a.save, "w") as f:
                    f.write(text_format.MessageToString(e))
                write(stub, a, p4runtime_pb2.Update.DELETE, e)
                print(f"deleted {want}")
                return
        sys.exit(f"p4rt_route: no entry for {want} in table {a.table_id}")
    else:
        e = p4runtime_pb2.Entity()
        with open(a.file) as f:
            text_format.Parse(f.read(), e)
        write(stub, a, p4runtime_pb2.Update.INSERT, e)
        print(f"restored {prefix_of(e, a.field_id)}")


if __name__ == "__main__":
    main()
