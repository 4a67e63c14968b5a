#!/usr/bin/env python3
"""Compares what a switch holds, as p4rt_dump.py read it, with the P4RT_TABLE entries a plan
says it should hold, entry by entry: every match, action and parameter value, and every WCMP
group's members (action, parameters, weight, watch port). Independent of Weft's code: it reads
the P4Info with the `p4runtime` package and decodes SONiC's APPL_DB text itself, by the rules the
P4Info's `@format` annotations state (SONiC's P4RT app's rules):

    PORT_NAME      a port name, its id from --ports        Ethernet8        -> 3
    MAC_ADDRESS    MAC                                     02:00:00:00:00:01
    IPV4_ADDRESS   dotted quad (LPM: /len)                 10.0.0.8/29
    IPV6_ADDRESS   IPv6 (LPM: /len)                        fd00::/64
    none           hex (9-bit fields without an annotation are ports, 48-bit MACs, ...)

Tables compared exactly (nothing missing, nothing else installed): every table the P4Info marks
`@weft_owner("controller")`, and the action profiles those tables use (groups compared by id and
members, member ids by what they point to). Tables the plugin writes itself are not the plan's.

usage: p4rt_plan_check.py --p4info weft.p4info.txtpb --entries entries.json --dump dump.json
           --ports Ethernet0=1,Ethernet4=2 [--watch-ports]
  entries.json: [{"key": "FIXED_IPV4_TABLE:{...}", "fields": [["action", "..."], ...]}, ...]
               (a plan's `add` list for one switch, or any list of that form)
Prints one JSON object {"compared": {...}, "missing": [...], "unexpected": [...]}; exit 1 when
anything differs, 2 on bad input.
"""
import argparse
import ipaddress
import json
import re
import sys

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2


def load_p4info(path):
    info = p4info_pb2.P4Info()
    with open(path) as f:
        text_format.Parse(f.read(), info)
    return info


def declared_format(annotations):
    for a in annotations:
        m = re.match(r"@format\((\w+)\)", a)
        if m:
            return m.group(1)
    return None


def fallback_format(name, bits):
    lname = name.lower()
    if bits == 9:
        return "PORT_NAME"
    if bits == 48:
        return "MAC_ADDRESS"
    if bits == 32 and "ipv4" in lname:
        return "IPV4_ADDRESS"
    if bits == 128 and "ipv6" in lname:
        return "IPV6_ADDRESS"
    return None


class Decoder:
    def __init__(self, ports):
        self.ports = ports

    def value(self, text, fmt, what):
        if fmt == "PORT_NAME":
            if text not in self.ports:
                raise ValueError(f"{what}: port {text!r} has no id in --ports")
            return self.ports[text]
        if fmt == "MAC_ADDRESS":
            return int(text.replace(":", ""), 16)
        if fmt == "IPV4_ADDRESS":
            return int(ipaddress.IPv4Address(text))
        if fmt == "IPV6_ADDRESS":
            return int(ipaddress.IPv6Address(text))
        return int(text, 16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--entries", required=True)
    ap.add_argument("--dump", required=True)
    ap.add_argument("--ports", default="", help="NAME=ID,... (CONFIG_DB PORT ids)")
    ap.add_argument("--watch-ports", action="store_true",
                    help="the plugin gives BMv2 watch ports (groups of 2+ members)")
    a = ap.parse_args()
    try:
        ports = dict((k, int(v)) for k, v in
                     (p.split("=", 1) for p in a.ports.split(",") if p))
        info = load_p4info(a.p4info)
        with open(a.entries) as f:
            entries = json.load(f)
        with open(a.dump) as f:
            dump = json.load(f)
        want = expected(info, entries, Decoder(ports), a.watch_ports)
    except (ValueError, KeyError, OSError) as e:
        sys.stderr.write(f"p4rt_plan_check.py: {e}\n")
        return 2
    got = held(info, dump)
    missing = sorted(want - got)
    unexpected = sorted(got - want)
    json.dump({"compared": {"expected": len(want), "held": len(got)},
               "missing": missing, "unexpected": unexpected}, sys.stdout, indent=1)
    print()
    return 1 if missing or unexpected else 0


def controller_tables(info):
    return [t for t in info.tables
            if any(x == '@weft_owner("controller")' for x in t.preamble.annotations)]


def expected(info, entries, dec, watch_ports):
    """The canonical lines the switch must hold for `entries`."""
    tables = {t.preamble.alias.upper(): t for t in controller_tables(info)}
    actions = {}
    for x in info.actions:
        actions[x.preamble.alias] = x
        actions[x.preamble.name] = x
    profiles = {p.preamble.id: p for p in info.action_profiles}
    out = set()
    for e in entries:
        key = e["key"]
        name, _, match_json = key.partition(":")
        if not name.startswith("FIXED_") or name[len("FIXED_"):] not in tables:
            raise ValueError(f"{key}: not a controller table of the P4Info")
        t = tables[name[len("FIXED_"):]]
        match_obj = json.loads(match_json)
        fields = dict(e["fields"])
        match = {}
        for mf in t.match_fields:
            text = match_obj.get(f"match/{mf.name}")
            if text is None:
                continue
            fmt = declared_format(mf.annotations) or fallback_format(mf.name, mf.bitwidth)
            what = f"{key} match/{mf.name}"
            if mf.match_type == p4info_pb2.MatchField.LPM:
                v, _, plen = text.partition("/")
                plen = int(plen) if plen else mf.bitwidth
                value = dec.value(v, fmt, what)
                value &= ((1 << mf.bitwidth) - 1) ^ ((1 << (mf.bitwidth - plen)) - 1)
                match[mf.name] = [value, plen]
            elif mf.match_type == p4info_pb2.MatchField.TERNARY:
                v, _, m = text.partition("&")
                match[mf.name] = [dec.value(v, fmt, what), dec.value(m, fmt, what)]
            else:
                match[mf.name] = dec.value(text, fmt, what)
        priority = int(match_obj.get("priority", 0))
        row = {"match": match, "priority": priority}
        if t.implementation_id:
            profile = profiles[t.implementation_id]
            (gfield,) = [mf for mf in t.match_fields]
            gid = match[gfield.name]
            row["group"] = gid
            members = json.loads(fields["actions"])
            many = len(members) > 1
            lines = []
            for m in members:
                act = actions[m["action"]]
                params = call_params(act, m, dec, key)
                watch = 0
                if watch_ports and many and m.get("watch_port"):
                    watch = dec.value(m["watch_port"], "PORT_NAME", f"{key} watch_port")
                lines.append(json.dumps({"action": act.preamble.name, "params": params,
                                         "weight": int(m["weight"]), "watch_port": watch},
                                        sort_keys=True))
            out.add(f"group {profile.preamble.name} {gid} " + " | ".join(sorted(lines)))
        else:
            act = actions[fields["action"]]
            row["action"] = act.preamble.name
            row["params"] = call_params(act, fields, dec, key)
        out.add(f"table {t.preamble.name} " + json.dumps(row, sort_keys=True))
    return out


def call_params(act, fields, dec, key):
    params = {}
    for p in act.params:
        text = fields.get(f"param/{p.name}")
        if text is None:
            raise ValueError(f"{key}: action {act.preamble.alias} without param/{p.name}")
        fmt = declared_format(p.annotations) or fallback_format(p.name, p.bitwidth)
        params[p.name] = dec.value(text, fmt, f"{key} param/{p.name}")
    return params


def held(info, dump):
    """The canonical lines of what the switch holds in the controller's tables and their
    profiles: groups with their members resolved to what the members call."""
    names = {t.preamble.name for t in controller_tables(info)}
    used = {t.implementation_id for t in controller_tables(info) if t.implementation_id}
    profiles = {p.preamble.name for p in info.action_profiles if p.preamble.id in used}
    out = set()
    for t, rows in dump.get("tables", {}).items():
        if t not in names:
            continue
        for r in rows:
            row = {"match": r["match"], "priority": r.get("priority", 0)}
            if "group" in r:
                row["group"] = r["group"]
            elif "member" in r:
                row["member"] = r["member"]
            else:
                row["action"] = r.get("action")
                row["params"] = r.get("params", {})
            out.add(f"table {t} " + json.dumps(row, sort_keys=True))
    for p in profiles:
        members = dump.get("members", {}).get(p, {})
        referenced = set()
        for gid, ms in dump.get("groups", {}).get(p, {}).items():
            lines = []
            for m in ms:
                referenced.add(str(m["member"]))
                call = members.get(str(m["member"]))
                what = ({"action": call["action"], "params": call["params"]} if call
                        else {"dangling_member": m["member"]})
                what.update(weight=m["weight"], watch_port=m.get("watch_port", 0))
                lines.append(json.dumps(what, sort_keys=True))
            out.add(f"group {p} {int(gid)} " + " | ".join(sorted(lines)))
        for mid in members:
            if mid not in referenced:
                out.add(f"member {p} {mid} in no group: " + json.dumps(members[mid], sort_keys=True))
    return out


if __name__ == "__main__":
    sys.exit(main())
