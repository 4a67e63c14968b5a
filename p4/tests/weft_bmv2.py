"""BMv2 in a private network namespace, for the pipeline's packet tests.

One `Bmv2` owns: a network namespace `weftp4-<pid>-<n>`, veth pairs s<i> (BMv2 port i) <-> h<i>
(the test's end) inside it, a `simple_switch_grpc` started inside it, and raw AF_PACKET sockets
on every h<i>. BMv2's gRPC server listens on a unix socket: the switch lives in the namespace,
and a unix socket reaches it from the test process without any bridge. `close()` kills BMv2 by
PID and deletes the namespace (which removes the veths); it runs even when a test fails.
"""
import ctypes
import errno
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
CPU_PORT = 255

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_counter = itertools.count()


def find_bmv2():
    """Path of simple_switch_grpc on PATH or in /opt/p4/bin, or None."""
    found = shutil.which("simple_switch_grpc")
    if found:
        return found
    if os.access("/opt/p4/bin/simple_switch_grpc", os.X_OK):
        return "/opt/p4/bin/simple_switch_grpc"
    return None


def find_cli(bmv2_path):
    """How to run simple_switch_CLI (the Thrift runtime CLI) of this BMv2: (argv, env), or None.

    The CLI is a Python script needing the `thrift` module and BMv2's own Python packages
    (<prefix>/lib/python3.*/site-packages); the first interpreter that has both is used."""
    cli = os.path.join(os.path.dirname(bmv2_path), "simple_switch_CLI")
    if not os.access(cli, os.X_OK):
        cli = shutil.which("simple_switch_CLI")
        if cli is None:
            return None
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(cli)))
    sites = glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(sites + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for python in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if not python or not os.access(python, os.X_OK):
            continue
        ok = subprocess.run([python, "-c", "import thrift, bm_runtime"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        if ok:
            return [python, cli], env
    return None


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def socket_in_netns(ns, *args):
    """A socket created inside network namespace `ns` (only this thread switches, briefly)."""
    here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(there)
        try:
            return socket.socket(*args)
        finally:
            _setns(here)
    finally:
        os.close(here)
        os.close(there)


def _run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


# <linux/socket.h>, <linux/if_packet.h>: not all in Python's socket module.
SO_RCVBUFFORCE = 33
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
RCVBUF_BYTES = 16 << 20


class PortIO:
    """The test's end (h<i>) of BMv2 port i: send frames, collect what BMv2 sends out."""

    def __init__(self, ns, port):
        self.port = port
        self.ifname = f"h{port}"
        self.sock = socket_in_netns(ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((self.ifname, 0))
        # The reader is a Python thread: on a loaded machine it can be off the CPU for a second
        # while BMv2 keeps sending, and the default receive buffer (~200 small frames) would
        # drop the rest. Root may raise it past rmem_max; the kernel need not queue the test's
        # own transmissions for it at all (PACKET_IGNORE_OUTGOING, Linux 4.20+).
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        try:
            self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass
        self.sock.settimeout(0.2)
        self._lock = threading.Lock()
        self._frames = []
        self._stop = False
        self._thread = threading.Thread(target=self._rx, daemon=True)
        self._thread.start()

    def _rx(self):
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError as e:
                # A packet socket reports ENETDOWN once when its link goes down; keep listening
                # for when it comes back. Anything else means the socket was closed.
                if e.errno == errno.ENETDOWN and not self._stop:
                    continue
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            with self._lock:
                self._frames.append((time.monotonic(), data))

    def send(self, frame):
        self.sock.send(bytes(frame))

    def frames(self):
        with self._lock:
            return [d for _, d in self._frames]

    def clear(self):
        with self._lock:
            self._frames.clear()

    def close(self):
        self._stop = True
        self._thread.join(timeout=2)
        self.sock.close()


class Bmv2:
    def __init__(self, binary, nports=4, device_id=None, priority_queues=8, extra_args=(),
                 bmv2_args=()):
        self.binary = binary
        self.ns = f"weftp4-{os.getpid()}-{next(_counter)}"
        self.device_id = device_id if device_id is not None else 0
        self.workdir = tempfile.mkdtemp(prefix="weftp4-")
        self.grpc_addr = f"unix:{self.workdir}/p4rt.sock"
        self.thrift_port = 9090  # inside the private namespace: never collides
        self.nports = nports
        self.proc = None
        self.ports = {}
        self._log = None
        self._ns_created = False
        try:
            _run("ip", "netns", "add", self.ns)
            self._ns_created = True
            self._ns("ip", "link", "set", "lo", "up")
            # IPv6 autoconfiguration would inject router solicitations and MLD reports.
            self._ns("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self._ns("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            for i in range(1, nports + 1):
                self._ns("ip", "link", "add", f"s{i}", "type", "veth", "peer", "name", f"h{i}")
                for dev in (f"s{i}", f"h{i}"):
                    self._ns("ip", "link", "set", dev, "up")
            cmd = ["ip", "netns", "exec", self.ns, binary,
                   "--device-id", str(self.device_id),
                   "--thrift-port", str(self.thrift_port),
                   "--no-p4",
                   # BMv2's default level is trace, and it formats every per-packet message
                   # even with no log sink: that alone halves the packet rate of this pipeline.
                   "--log-level", "off", *bmv2_args]
            for i in range(1, nports + 1):
                cmd += ["-i", f"{i}@s{i}"]
            cmd += ["--", "--grpc-server-addr", self.grpc_addr,
                    "--cpu-port", str(CPU_PORT),
                    "--priority-queues", str(priority_queues)]
            cmd += list(extra_args)
            self.log_path = os.path.join(self.workdir, "bmv2.out")
            self._log = open(self.log_path, "wb")
            # `ip netns exec` execs BMv2 itself, so this PID is the switch.
            self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
            for i in range(1, nports + 1):
                self.ports[i] = PortIO(self.ns, i)
        except BaseException:
            self.close()
            raise

    def _ns(self, *cmd):
        _run("ip", "netns", "exec", self.ns, *cmd)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def output(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except (OSError, AttributeError):
            return ""

    def set_link(self, port, up):
        """Fail or restore the link of BMv2 port `port` by taking the FAR end (h<port>) down:
        BMv2's own interface then loses carrier, as with a cut cable. Taking BMv2's own
        interface (s<port>) down instead freezes the whole switch until a packet arrives on that
        port again (behavioral-model issue #1215, seen here too)."""
        self._ns("ip", "link", "set", f"h{port}", "up" if up else "down")

    def cli(self, cli, commands):
        """Run Thrift runtime CLI commands (`cli` from find_cli) against this switch."""
        argv, env = cli
        res = subprocess.run(
            ["ip", "netns", "exec", self.ns, *argv, "--thrift-port", str(self.thrift_port)],
            input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=60,
            env=env)
        if res.returncode != 0 or "Error" in res.stdout:
            raise RuntimeError(f"simple_switch_CLI failed: {res.stdout}\n{res.stderr}")
        return res.stdout

    def close(self):
        for p in self.ports.values():
            p.close()
        self.ports = {}
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._ns_created:
            subprocess.run(["ip", "netns", "del", self.ns], stderr=subprocess.DEVNULL)
            self._ns_created = False
        shutil.rmtree(self.workdir, ignore_errors=True)
