#!/usr/bin/env bash
# Installs what Weft needs on a fresh Debian machine, idempotently:
#   - Debian packages: redis-server (each switch's SONiC DB), libzmq3-dev (the ZMQ channel),
#     etcd-server (`weft run --ha`),
#     iproute2 (testbed namespaces and veths), graphviz (`weft graph --format svg`), prometheus
#     and curl (the metrics scenario; promtool checks the alert rules), chromium and
#     chromium-driver (the live page's browser test), and the Python venv module;
#   - a Python virtualenv in .venv with the packages in requirements.txt (P4Runtime bindings for
#     the schema script and the independent read-back, scapy for packet tests).
# BMv2 (simple_switch_grpc) and p4c are not in any package registry: build them from p4lang's
# sources into /opt/p4 (see README, "BMv2 and p4c"). Without them the BMv2 tests print SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need_apt+=(redis-tools)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
# `weft run --ha` elects its leader on etcd; the HA tests start etcd on loopback.
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
command -v ethtool >/dev/null 2>&1 || need_apt+=(ethtool)
# `weft graph --format svg` renders with Graphviz's dot.
command -v dot >/dev/null 2>&1 || need_apt+=(graphviz)
# The metrics scenario scrapes the plugins and `weft run` with a real Prometheus (and curl for
# its HTTP query API).
command -v prometheus >/dev/null 2>&1 || need_apt+=(prometheus)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
# The live page's browser test drives Debian's headless Chromium through chromedriver.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# The operator bench measures peak RSS of whole commands with GNU time.
[ -x /usr/bin/time ] || need_apt+=(time)
# sonic-db's ZMQ channel links Debian's libzmq (the library swss-common links), found with
# pkg-config at build time.
pkg-config --exists libzmq 2>/dev/null || need_apt+=(libzmq3-dev pkg-config)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
/usr/bin/python3 -c 'import thrift' >/dev/null 2>&1 || need_apt+=(python3-thrift)
if ((${#need_apt[@]})); then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# The distribution starts a system redis-server on 6379; Weft's tests start their own on private
# sockets, so the system one is left alone.

stamp=.venv/.requirements.sha
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [[ ! -x .venv/bin/python || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "setup: creating .venv from requirements.txt"
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
  echo "$want" >"$stamp"
fi

if command -v simple_switch_grpc >/dev/null 2>&1 || [[ -x /opt/p4/bin/simple_switch_grpc ]]; then
  echo "setup: BMv2 simple_switch_grpc found"
else
  echo "setup: NOTE: BMv2 simple_switch_grpc not found (PATH or /opt/p4/bin): BMv2 tests will print SKIPPED."
  echo "setup:       Build p4lang/PI and behavioral-model (with PI and Thrift) into /opt/p4; see the README."
fi
echo "setup: done"
