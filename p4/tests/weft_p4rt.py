"""A small P4Runtime client for the pipeline's packet tests, on the PyPI `p4runtime` package.

Names are P4Info names (fully qualified or alias) resolved through the committed P4Info, so a
renamed table fails here with a clear KeyError, not a silent miss.
"""
import os

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import queue  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import grpc  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from p4.config.v1 import p4info_pb2  # noqa: E402
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc  # noqa: E402


def encode(value, bitwidth):
    """Full-width big-endian bytes of an unsigned value (PI accepts these)."""
    if value < 0 or value >> bitwidth:
        raise ValueError(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes((bitwidth + 7) // 8, "big")


def decode(data):
    return int.from_bytes(data, "big") if data else 0


class P4Info:
    def __init__(self, path):
        self.info = p4info_pb2.P4Info()
        with open(path) as f:
            text_format.Parse(f.read(), self.info)
        self.path = path

    @staticmethod
    def _find(items, name, kind):
        for x in items:
            if x.preamble.name == name or x.preamble.alias == name:
                return x
        raise KeyError(f"no {kind} {name!r} in the P4Info")

    def table(self, name):
        return self._find(self.info.tables, name, "table")

    def action(self, name):
        return self._find(self.info.actions, name, "action")

    def counter(self, name):
        return self._find(self.info.counters, name, "counter")

    def direct_counter(self, name):
        return self._find(self.info.direct_counters, name, "direct counter")

    def action_profile(self, name):
        return self._find(self.info.action_profiles, name, "action profile")

    def packet_metadata(self, name):
        for m in self.info.controller_packet_metadata:
            if m.preamble.name == name:
                return m
        raise KeyError(f"no controller packet metadata {name!r}")


class P4RuntimeClient:
    """Primary client of one device: arbitration, pipeline push, writes, reads, packet-in."""

    def __init__(self, address, device_id, p4info_path, election_id=1):
        self.device_id = device_id
        self.p4info = P4Info(p4info_path)
        self.election_id = p4runtime_pb2.Uint128(high=0, low=election_id)
        self.channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        grpc.channel_ready_future(self.channel).result(timeout=60)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self._requests = queue.Queue()
        self.packet_ins = queue.Queue()
        self._arbitrated = threading.Event()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read_stream, daemon=True)
        self._reader.start()
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = device_id
        req.arbitration.election_id.CopyFrom(self.election_id)
        self._requests.put(req)
        if not self._arbitrated.wait(30):
            raise TimeoutError("no arbitration answer from the switch")

    def _read_stream(self):
        try:
            for resp in self._stream:
                kind = resp.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitrated.set()
                elif kind == "packet":
                    self.packet_ins.put(resp.packet)
        except grpc.RpcError:
            pass

    def close(self):
        self._requests.put(None)
        self.channel.close()

    # ---- pipeline -------------------------------------------------------------------------
    def set_pipeline(self, bmv2_json_path):
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest()
        req.device_id = self.device_id
        req.election_id.CopyFrom(self.election_id)
        req.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
        req.config.p4info.CopyFrom(self.p4info.info)
        with open(bmv2_json_path, "rb") as f:
            req.config.p4_device_config = f.read()
        self.stub.SetForwardingPipelineConfig(req, timeout=60)

    # ---- writes -----------------------------------------------------------------------------
    def write(self, entities, update_type=p4runtime_pb2.Update.INSERT):
        req = p4runtime_pb2.WriteRequest()
        req.device_id = self.device_id
        req.election_id.CopyFrom(self.election_id)
        for e in entities:
            u = req.updates.add()
            u.type = update_type
            u.entity.CopyFrom(e)
        self.stub.Write(req, timeout=30)

    def _action(self, msg, action, params):
        a = self.p4info.action(action)
        msg.action_id = a.preamble.id
        given = dict(params or {})
        for p in a.params:
            if p.name not in given:
                raise KeyError(f"action {action}: missing param {p.name}")
            msg.params.add(param_id=p.id, value=encode(given.pop(p.name), p.bitwidth))
        if given:
            raise KeyError(f"action {action}: unknown params {sorted(given)}")

    def table_entry(self, table, match=None, action=None, params=None, priority=0,
                    group_id=None, member_id=None, default=False):
        """match: {field: value | (value, prefix_len) for lpm | (value, mask) for ternary}."""
        t = self.p4info.table(table)
        e = p4runtime_pb2.Entity()
        te = e.table_entry
        te.table_id = t.preamble.id
        te.priority = priority
        te.is_default_action = default
        fields = {f.name: f for f in t.match_fields}
        for name, value in (match or {}).items():
            f = fields[name]
            m = te.match.add(field_id=f.id)
            if f.match_type == p4info_pb2.MatchField.EXACT:
                m.exact.value = encode(value, f.bitwidth)
            elif f.match_type == p4info_pb2.MatchField.LPM:
                v, plen = value
                if plen == 0:
                    # P4Runtime: a wildcard is expressed by leaving the field out.
                    te.match.pop()
                    continue
                v &= ((1 << f.bitwidth) - 1) ^ ((1 << (f.bitwidth - plen)) - 1)
                m.lpm.value = encode(v, f.bitwidth)
                m.lpm.prefix_len = plen
            elif f.match_type == p4info_pb2.MatchField.TERNARY:
                v, mask = value
                if mask == 0:
                    te.match.pop()
                    continue
                m.ternary.value = encode(v & mask, f.bitwidth)
                m.ternary.mask = encode(mask, f.bitwidth)
            else:
                raise ValueError(f"match kind of {name} not supported by this helper")
        if group_id is not None:
            te.action.action_profile_group_id = group_id
        elif member_id is not None:
            te.action.action_profile_member_id = member_id
        elif action is not None:
            self._action(te.action.action, action, params)
        return e

    def insert(self, table, match=None, action=None, params=None, **kw):
        self.write([self.table_entry(table, match, action, params, **kw)])

    def modify(self, table, match=None, action=None, params=None, **kw):
        self.write([self.table_entry(table, match, action, params, **kw)],
                   p4runtime_pb2.Update.MODIFY)

    def delete(self, table, match=None, **kw):
        self.write([self.table_entry(table, match, **kw)], p4runtime_pb2.Update.DELETE)

    def set_default(self, table, action, params=None):
        self.write([self.table_entry(table, None, action, params, default=True)],
                   p4runtime_pb2.Update.MODIFY)

    def member(self, profile, member_id, action, params):
        e = p4runtime_pb2.Entity()
        m = e.action_profile_member
        m.action_profile_id = self.p4info.action_profile(profile).preamble.id
        m.member_id = member_id
        self._action(m.action, action, params)
        return e

    def group(self, profile, group_id, members, max_size=0):
        """members: [(member_id, weight, watch_port or None)]"""
        e = p4runtime_pb2.Entity()
        g = e.action_profile_group
        g.action_profile_id = self.p4info.action_profile(profile).preamble.id
        g.group_id = group_id
        g.max_size = max_size
        for member_id, weight, watch_port in members:
            m = g.members.add(member_id=member_id, weight=weight)
            if watch_port is not None:
                m.watch_port = encode(watch_port, 32)
        return e

    def clone_session(self, session_id, ports, truncate=0):
        e = p4runtime_pb2.Entity()
        cs = e.packet_replication_engine_entry.clone_session_entry
        cs.session_id = session_id
        cs.packet_length_bytes = truncate
        for i, p in enumerate(ports):
            cs.replicas.add(egress_port=p, instance=i + 1)
        self.write([e])

    # ---- reads ------------------------------------------------------------------------------
    def _read(self, entity):
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.add().CopyFrom(entity)
        out = []
        for resp in self.stub.Read(req, timeout=30):
            out.extend(resp.entities)
        return out

    def counters(self, name):
        """{index: (packets, bytes)} of every non-zero cell of an indexed counter."""
        e = p4runtime_pb2.Entity()
        e.counter_entry.counter_id = self.p4info.counter(name).preamble.id
        res = {}
        for x in self._read(e):
            d = x.counter_entry.data
            if d.packet_count or d.byte_count:
                res[x.counter_entry.index.index] = (d.packet_count, d.byte_count)
        return res

    def counter(self, name, index):
        e = p4runtime_pb2.Entity()
        e.counter_entry.counter_id = self.p4info.counter(name).preamble.id
        e.counter_entry.index.index = index
        (x,) = self._read(e)
        return x.counter_entry.data.packet_count, x.counter_entry.data.byte_count

    def direct_counter(self, table, match, priority=0):
        e = p4runtime_pb2.Entity()
        e.direct_counter_entry.table_entry.CopyFrom(
            self.table_entry(table, match, priority=priority).table_entry)
        (x,) = self._read(e)
        d = x.direct_counter_entry.data
        return d.packet_count, d.byte_count

    # ---- packet I/O ---------------------------------------------------------------------------
    def packet_out(self, payload, egress_port):
        meta = self.p4info.packet_metadata("packet_out")
        req = p4runtime_pb2.StreamMessageRequest()
        req.packet.payload = payload
        for m in meta.metadata:
            if m.name == "egress_port":
                req.packet.metadata.add(metadata_id=m.id, value=encode(egress_port, m.bitwidth))
        self._requests.put(req)

    def packet_in_metadata(self, packet):
        meta = self.p4info.packet_metadata("packet_in")
        names = {m.id: m.name for m in meta.metadata}
        return {names.get(m.metadata_id, m.metadata_id): decode(m.value) for m in packet.metadata}

    def wait_packet_in(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                return self.packet_ins.get(timeout=left)
            except queue.Empty:
                return None
