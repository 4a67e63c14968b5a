#!/usr/bin/env python3
"""Share p4c's per-action temporaries in a BMv2 JSON file (run by p4/compile.sh on every output).

p4c's BMv2 back end gives every computed extern argument (a counter or register index, a
register value, a hash input, a random bound, a clone session) a metadata field of its own, and
copy propagation undoes any attempt to compute it into a shared field in P4. BMv2 resets every
metadata field of every packet (about 600 instructions per field, GMP), so Weft's ~50
temporaries cost every packet more than most of what the packet does. Each temporary is written
and read inside one action only, so temporaries of different actions can share a field: this
pass renames them to `tmp_w<W>_<i>` (the i-th temporary of width W within an action), so the
program keeps one field per width and slot instead of one per temporary. Variables declared in
an action body are temporaries too (p4c makes them scalars fields as well): the P4 declares
values that live only within one action that way rather than as `local_metadata_t` fields.

A temporary is only shared when the JSON proves it action-local: every reference to it is in
one action's primitives or in calculations that only that action uses, and the action's first
primitive touching it writes it without reading it (assign, register_read, hash, random).
`local_metadata_t` fields and anything else are left as p4c wrote them.

The file is edited as text (only the field names and the scalars header's field list change),
so the output keeps p4c's layout and stays byte-for-byte reproducible.

usage: share_temps.py FILE.json   (rewrites FILE.json in place)
"""
import collections
import json
import re
import sys

SCALARS = "scalars"
USER = "local_metadata_t."
# Primitives whose first parameter is a field they write without reading it.
WRITES_FIRST = {"assign", "register_read", "modify_field_with_hash_based_offset",
                "modify_field_rng_uniform"}


def field_refs(node, out):
    """Every ["scalars", name] field reference under `node`, appended to `out` (in order)."""
    if isinstance(node, dict):
        if node.get("type") == "field" and isinstance(node.get("value"), list):
            value = node["value"]
            if len(value) == 2 and value[0] == SCALARS:
                out.append(value[1])
        for v in node.values():
            field_refs(v, out)
    elif isinstance(node, list):
        for v in node:
            field_refs(v, out)


def calc_refs(node, out):
    """Names of calculations referenced under `node`."""
    if isinstance(node, dict):
        if node.get("type") == "calculation":
            out.append(node["value"])
        for v in node.values():
            calc_refs(v, out)
    elif isinstance(node, list):
        for v in node:
            calc_refs(v, out)


def plan(prog):
    """{old temporary name: shared name} for every temporary proven action-local."""
    scalars = next(h for h in prog["header_types"] if h["name"] == "scalars_0")
    widths = {f[0]: (f[1], f[2]) for f in scalars["fields"]}
    # Already shared fields (a second run) are left as they are: the pass is idempotent.
    temps = {name for name in widths
             if not name.startswith((USER, "_padding", "tmp_w"))}

    calc_inputs = {}
    for calc in prog.get("calculations", []):
        refs = []
        field_refs(calc, refs)
        calc_inputs[calc["name"]] = refs

    # Where each temporary is referenced: by which action, and outside actions at all?
    users = collections.defaultdict(set)
    calc_users = collections.defaultdict(set)
    for action in prog["actions"]:
        refs, calcs = [], []
        field_refs(action["primitives"], refs)
        calc_refs(action["primitives"], calcs)
        for name in refs:
            users[name].add(action["name"])
        for calc in calcs:
            calc_users[calc].add(action["name"])
            for name in calc_inputs.get(calc, []):
                users[name].add(action["name"])
    outside = []
    for key, value in prog.items():
        if key in ("actions", "calculations", "header_types"):
            continue
        field_refs(value, outside)
    for calc, names in calc_inputs.items():
        if len(calc_users.get(calc, ())) != 1:
            outside.extend(names)
    outside = set(outside)

    mapping = {}
    for action in prog["actions"]:
        slots = collections.Counter()
        seen = set()
        for prim in action["primitives"]:
            refs, calcs = [], []
            field_refs(prim["parameters"], refs)
            calc_refs(prim["parameters"], calcs)
            for calc in calcs:
                refs.extend(calc_inputs.get(calc, []))
            dest = None
            if prim["op"] in WRITES_FIRST:
                first = prim["parameters"][0]
                if first.get("type") == "field" and first["value"][0] == SCALARS:
                    dest = first["value"][1]
            rhs = []
            if dest is not None:
                field_refs(prim["parameters"][1:], rhs)
                rhs_calcs = []
                calc_refs(prim["parameters"][1:], rhs_calcs)
                for calc in rhs_calcs:
                    rhs.extend(calc_inputs.get(calc, []))
            for name in refs:
                if name not in temps or name in seen:
                    continue
                seen.add(name)
                local = (users[name] == {action["name"]} and name not in outside
                         and name == dest and name not in rhs)
                if local:
                    width, signed = widths[name]
                    mapping[name] = f"tmp_w{width}{'s' if signed else ''}_{slots[(width, signed)]}"
                    slots[(width, signed)] += 1
    return scalars, widths, mapping


def main():
    path = sys.argv[1]
    with open(path) as f:
        text = f.read()
    prog = json.loads(text)
    scalars, widths, mapping = plan(prog)
    if not mapping:
        return 0

    # The scalars header: shared fields first (in a fixed order), then the rest as p4c wrote
    # them, then the padding p4c adds to make the header whole bytes, recomputed.
    shared = sorted(set(mapping.values()),
                    key=lambda n: (int(re.match(r"tmp_w(\d+)", n).group(1)), n))
    shared_widths = {}
    for old, new in mapping.items():
        shared_widths[new] = widths[old]
    kept = [f for f in scalars["fields"]
            if f[0] not in mapping and not f[0].startswith("_padding")]
    fields = [[n, shared_widths[n][0], shared_widths[n][1]] for n in shared] + kept
    bits = sum(f[1] for f in fields)
    if bits % 8:
        fields.append(["_padding_0", 8 - bits % 8, False])

    start = text.index('"name" : "scalars_0"')
    open_at = text.index('"fields" : [', start)
    close_at = text.index("\n      ]", open_at)
    body = ",\n".join(f'        ["{n}", {w}, {"true" if s else "false"}]' for n, w, s in fields)
    text = text[:open_at] + '"fields" : [\n' + body + text[close_at:]

    def rename(m):
        return f'["scalars", "{mapping.get(m.group(1), m.group(1))}"]'

    text = re.sub(r'\["scalars", "([^"]+)"\]', rename, text)
    json.loads(text)  # still valid JSON
    with open(path, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
