"""Fixtures for the pipeline's packet tests on a real BMv2 simple_switch_grpc.

Without BMv2 every test prints `SKIPPED: <test>: BMv2 simple_switch_grpc not found ...` and is
skipped. Where BMv2 is installed every test runs or fails: a missing prerequisite beside it
(root, simple_switch_CLI or the `thrift`/`bm_runtime` modules it runs on) is a failure, unless
WEFT_REQUIRE_BMV2=0 allows skipping; WEFT_REQUIRE_BMV2=1 fails even without BMv2 (the Rust
harness's rule, `weft_tests::bmv2::bmv2_required`). Each test that runs or skips is recorded in
the file WEFT_TEST_LEDGER names, which `scripts/test.sh` summarises. Each test gets its own switch
in its own network namespace, torn down (BMv2 killed by PID, namespace deleted) even when the
test fails.
"""
import os

os.environ.setdefault("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")

import sys  # noqa: E402

import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from weft_bmv2 import Bmv2, find_bmv2, find_cli  # noqa: E402
from weft_p4rt import P4RuntimeClient  # noqa: E402

P4_DIR = os.path.dirname(HERE)
BMV2_JSON = os.path.join(P4_DIR, "build", "weft.json")
P4INFO = os.path.join(P4_DIR, "build", "weft.p4info.txtpb")


def _required():
    """Whether a BMv2 test must run or fail: WEFT_REQUIRE_BMV2=1 always, =0 never, else
    whenever BMv2 is installed."""
    v = os.environ.get("WEFT_REQUIRE_BMV2")
    if v in ("0", "1"):
        return v == "1"
    return find_bmv2() is not None


def _ledger(name, why=None):
    path = os.environ.get("WEFT_TEST_LEDGER")
    if not path:
        return
    clean = lambda s: s.replace("\t", " ").replace("\n", " ")  # noqa: E731
    line = f"skipped\t{clean(name)}\t{clean(why)}\n" if why else f"ran\t{clean(name)}\n"
    with open(path, "a") as f:
        f.write(line)


def _unavailable(request, what):
    name = request.node.nodeid
    if _required():
        why = ("WEFT_REQUIRE_BMV2=1" if os.environ.get("WEFT_REQUIRE_BMV2") == "1"
               else "BMv2 is installed (WEFT_REQUIRE_BMV2=0 to allow skipping)")
        pytest.fail(f"{why}: {name} cannot run: {what}")
    msg = f"SKIPPED: {name}: {what}"
    _ledger(name, what)
    # Straight to the terminal, past pytest's capture: the skip must be loud.
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        with capture.global_and_fixture_disabled():
            print("\n" + msg)
    else:
        print(msg)
    pytest.skip(what)


@pytest.fixture
def bmv2_binary(request):
    path = find_bmv2()
    if path is None:
        _unavailable(request, "BMv2 simple_switch_grpc not found (PATH, /opt/p4/bin)")
    if os.geteuid() != 0:
        _unavailable(request, "BMv2 tests need root (network namespaces, veths)")
    _ledger(request.node.nodeid)
    return path


class Switch:
    """A running BMv2 with Weft's pipeline and a primary P4Runtime client."""

    def __init__(self, bmv2, client, cli, request):
        self.bmv2 = bmv2
        self.p4rt = client
        self.cli_binary = cli
        self.request = request

    def port(self, i):
        return self.bmv2.ports[i]

    def cli(self, *commands):
        if self.cli_binary is None:
            _unavailable(self.request, "BMv2's simple_switch_CLI with a Python that has `thrift` "
                                       "and `bm_runtime` not found (scripts/setup.sh)")
        return self.bmv2.cli(self.cli_binary, list(commands))

    def set_queue_rate(self, port, pps, depth=None):
        """BMv2 egress rate limit of a port (all its queues), to build a queue on demand."""
        cmds = [f"set_queue_rate {pps} {port}"]
        if depth is not None:
            cmds.append(f"set_queue_depth {depth} {port}")
        self.cli(*cmds)


def make_switch(request, binary, nports):
    bmv2 = Bmv2(binary, nports=nports)
    client = None
    try:
        client = P4RuntimeClient(bmv2.grpc_addr, bmv2.device_id, P4INFO)
        client.set_pipeline(BMV2_JSON)
        return Switch(bmv2, client, find_cli(binary), request)
    except BaseException:
        out = bmv2.output()
        if client is not None:
            client.close()
        bmv2.close()
        if out:
            print(f"BMv2 output:\n{out}")
        raise


def _switch_fixture(request, binary):
    sw = make_switch(request, binary, nports=4)
    try:
        yield sw
    finally:
        alive = sw.bmv2.alive()
        out = sw.bmv2.output()
        sw.p4rt.close()
        sw.bmv2.close()
        if not alive:
            pytest.fail(f"BMv2 died during the test; its output:\n{out}")


@pytest.fixture
def switch(request, bmv2_binary):
    yield from _switch_fixture(request, bmv2_binary)


@pytest.fixture
def switch2(request, bmv2_binary):
    """A second, independent switch (for tests comparing two switches)."""
    yield from _switch_fixture(request, bmv2_binary)
