"""p4/share_temps.py (compile.sh's post-pass over p4c's BMv2 JSON): temporaries that are local to
one action share fields; anything it cannot prove local is left alone. No BMv2 needed."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
P4_DIR = os.path.dirname(HERE)
sys.path.insert(0, P4_DIR)

import share_temps  # noqa: E402


def field(name):
    return {"type": "field", "value": ["scalars", name]}


def assign(dst, src):
    return {"op": "assign", "parameters": [field(dst), src]}


def count(name):
    return {"op": "count", "parameters": [{"type": "counter_array", "value": "c"}, field(name)]}


def program(actions, conditionals=(), calculations=()):
    fields = [["tmp", 32, False], ["tmp_0", 32, False], ["tmp_1", 32, False],
              ["tmp_2", 16, False], ["local_metadata_t.x", 32, False], ["_padding_0", 0, False]]
    return {
        "header_types": [{"name": "scalars_0", "id": 0, "fields": fields}],
        "calculations": list(calculations),
        "actions": [{"name": n, "id": i, "runtime_data": [], "primitives": p}
                    for i, (n, p) in enumerate(actions)],
        "pipelines": [{"name": "ingress", "tables": [], "conditionals": list(conditionals)}],
    }


X = field("local_metadata_t.x")


def test_temporaries_of_different_actions_share_one_field_per_width_and_slot():
    prog = program([
        ("a", [assign("tmp", X), count("tmp")]),
        ("b", [assign("tmp_0", X), count("tmp_0"), assign("tmp_1", X), count("tmp_1")]),
        ("c", [assign("tmp_2", X), count("tmp_2")]),
    ])
    _, _, mapping = share_temps.plan(prog)
    assert mapping == {"tmp": "tmp_w32_0", "tmp_0": "tmp_w32_0", "tmp_1": "tmp_w32_1",
                       "tmp_2": "tmp_w16_0"}


def test_a_temporary_read_before_its_action_writes_it_is_not_shared():
    prog = program([
        ("a", [assign("tmp", X), count("tmp")]),
        ("b", [count("tmp_0"), assign("tmp_0", X)]),
        ("c", [assign("tmp_1", field("tmp_1"))]),
    ])
    _, _, mapping = share_temps.plan(prog)
    assert mapping == {"tmp": "tmp_w32_0"}


def test_a_temporary_used_by_two_actions_or_outside_actions_is_not_shared():
    cond = {"name": "node_1", "expression": {"type": "expression", "value": {
        "op": "==", "left": field("tmp_1"), "right": {"type": "hexstr", "value": "0x1"}}}}
    prog = program([
        ("a", [assign("tmp", X), count("tmp"), assign("tmp_1", X)]),
        ("b", [assign("tmp", X), count("tmp")]),
        ("c", [assign("tmp_2", X), count("tmp_2")]),
    ], conditionals=[cond])
    _, _, mapping = share_temps.plan(prog)
    assert mapping == {"tmp_2": "tmp_w16_0"}


def test_a_hash_input_of_a_calculation_two_actions_use_is_not_shared():
    calc = {"name": "calc", "id": 0, "algo": "crc32", "input": [field("tmp")]}
    hashed = {"op": "modify_field_with_hash_based_offset",
              "parameters": [X, {"type": "hexstr", "value": "0x0"},
                             {"type": "calculation", "value": "calc"},
                             {"type": "hexstr", "value": "0xffffffff"}]}
    prog = program([("a", [assign("tmp", X), hashed]), ("b", [hashed])], calculations=[calc])
    _, _, mapping = share_temps.plan(prog)
    assert "tmp" not in mapping


def test_the_committed_pipeline_keeps_no_unshared_p4c_temporary(tmp_path):
    """Every scalars field of build/weft.json is a local_metadata_t field, a shared slot or the
    padding, and running the pass again changes nothing (compile.sh's output is a fixed point)."""
    path = os.path.join(P4_DIR, "build", "weft.json")
    with open(path) as f:
        text = f.read()
    prog = json.loads(text)
    scalars = next(h for h in prog["header_types"] if h["name"] == "scalars_0")
    others = [f[0] for f in scalars["fields"]
              if not f[0].startswith(("local_metadata_t.", "tmp_w", "_padding"))]
    assert others == []
    copy = tmp_path / "weft.json"
    copy.write_text(text)
    subprocess.run([sys.executable, os.path.join(P4_DIR, "share_temps.py"), str(copy)],
                   check=True)
    assert copy.read_text() == text
