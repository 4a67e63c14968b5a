#!/usr/bin/env python3
"""Write N table entries to a P4Runtime switch with p4lang's Python bindings (grpcio).

The reference the Rust benchmark (p4rt/benches/bmv2_write.rs) compares itself with, on the
same BMv2 in the same run. It builds exactly the entries the Rust side builds (key
10.0.0.0 + i at full prefix, every action parameter = i masked to its width), becomes primary,
and writes them in batches of --batch with --in-flight Writes outstanding (grpcio futures).

Entries are built before timing. Without --prebuilt the timed loop includes protobuf
serialisation, as a Python client normally does; with --prebuilt requests are serialised before
timing, which leaves the transport and the switch. Which protobuf runtime serialises is the
environment's: PyPI's p4runtime 1.6.0 modules on protobuf 5 import only with the pure-Python
runtime (the default here, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, slow); PI's generated
modules with Debian's python3-protobuf run on its C++ runtime (=cpp). The JSON line printed names
the runtime used. Run each on an empty table.

usage: py_write.py --addr 127.0.0.1:PORT --device-id 1 --election-id 100 --table-id ID
       --field-id ID --field-bits 32 --kind lpm|exact --action-id ID --params ID:BITS,...
       --count N [--offset K] [--batch 1000] [--in-flight 8] [--prebuilt]
"""

import argparse
import json
import os
import queue
import sys
import threading
import time

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import grpc  # noqa: E402
from google.protobuf import __version__ as protobuf_version  # noqa: E402
from google.protobuf.internal import api_implementation  # noqa: E402
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402


def canonical(v, bits):
    n = max(1, (bits + 7) // 8)
    b = (v & ((1 << bits) - 1) if bits < 128 else v).to_bytes(n, "big")
    b = b.lstrip(b"\x00")
    return b if b else b"\x00"


def build_updates(a, start, count):
    params = []
    for item in a.params.split(","):
        if item:
            pid, bits = item.split(":")
            params.append((int(pid), int(bits)))
    updates = []
    for i in range(start, start + count):
        u = p4runtime_pb2.Update()
        u.type = p4runtime_pb2.Update.INSERT
        te = u.entity.table_entry
        te.table_id = a.table_id
        m = te.match.add()
        m.field_id = a.field_id
        key = canonical((10 << (a.field_bits - 8)) + i, a.field_bits)
        if a.kind == "lpm":
            m.lpm.value = key
            m.lpm.prefix_len = a.field_bits
        else:
            m.exact.value = key
        act = te.action.action
        act.action_id = a.action_id
        for pid, bits in params:
            p = act.params.add()
            p.param_id = pid
            p.value = canonical(i & ((1 << min(max(bits, 1), 64)) - 1), bits)
        updates.append(u)
    return updates


def become_primary(stub, a):
    requests = queue.Queue()
    req = p4runtime_pb2.StreamMessageRequest()
    req.arbitration.device_id = a.device_id
    req.arbitration.election_id.low = a.election_id
    requests.put(req)

    def gen():
        while True:
            item = requests.get()
            if item is None:
                return
            yield item

    responses = stub.StreamChannel(gen())
    primary = threading.Event()

    def reader():
        try:
            for r in responses:
                if r.HasField("arbitration") and r.arbitration.status.code == 0:
                    primary.set()
        except grpc.RpcError:
            pass

    threading.Thread(target=reader, daemon=True).start()
    if not primary.wait(30):
        sys.exit("not primary within 30 s")
    return requests


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--device-id", type=int, default=1)
    ap.add_argument("--election-id", type=int, default=100)
    ap.add_argument("--table-id", type=int, required=True)
    ap.add_argument("--field-id", type=int, required=True)
    ap.add_argument("--field-bits", type=int, required=True)
    ap.add_argument("--kind", choices=["lpm", "exact"], required=True)
    ap.add_argument("--action-id", type=int, required=True)
    ap.add_argument("--params", default="")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--prebuilt", action="store_true", help="serialise before timing")
    a = ap.parse_args()

    opts = [("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20)]
    channel = grpc.insecure_channel(a.addr, options=opts)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
    stream = become_primary(stub, a)

    updates = build_updates(a, a.offset, a.count)
    requests = []
    for s in range(0, len(updates), a.batch):
        req = p4runtime_pb2.WriteRequest()
        req.device_id = a.device_id
        req.election_id.low = a.election_id
        req.atomicity = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR
        req.updates.extend(updates[s : s + a.batch])
        requests.append(req)

    if a.prebuilt:
        payloads = [r.SerializeToString() for r in requests]
        write = channel.unary_unary(
            "/p4.v1.P4Runtime/Write",
            request_serializer=lambda b: b,
            response_deserializer=p4runtime_pb2.WriteResponse.FromString,
        )
    else:
        payloads = requests
        write = stub.Write

    t0 = time.perf_counter()
    pending = []
    failures = 0
    for p in payloads:
        pending.append(write.future(p))
        if len(pending) >= a.in_flight:
            try:
                pending.pop(0).result()
            except grpc.RpcError:
                failures += 1
    for f in pending:
        try:
            f.result()
        except grpc.RpcError:
            failures += 1
    seconds = time.perf_counter() - t0
    stream.put(None)
    print(json.dumps({
        "count": a.count,
        "batch": a.batch,
        "in_flight": a.in_flight,
        "prebuilt": a.prebuilt,
        "seconds": seconds,
        "entries_per_s": a.count / seconds,
        "failed_batches": failures,
        "protobuf": f"{api_implementation.Type()} {protobuf_version}",
    }))


if __name__ == "__main__":
    main()
