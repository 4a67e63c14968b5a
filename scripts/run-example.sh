#!/usr/bin/env bash
# The main job, on the small leaf-spine example (2 spines, 4 leaves, 8 hosts):
#   set up; build; validate and summarise the intent; bring up the emulated fabric (a BMv2,
#   a redis-server and a plugin per switch, hosts in network namespaces); apply the intent
#   through each switch's SONiC Redis; show all-pairs reachability and the per-spine spread;
#   take the fabric down again.
# Without BMv2 it still compiles and applies everything into the switches' SONiC DBs (one
# redis-server each) and says what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -q -j2 -p weft-controller -p weft-sonic-plugin
weft=${CARGO_TARGET_DIR:-target}/release/weft
example=${1:-topology/examples/leaf-spine-small.yaml}

echo "== weft validate"
$weft validate topology/examples/*.yaml
echo
echo "== weft show $example"
$weft show "$example"
echo

have_bmv2=0
if command -v simple_switch_grpc >/dev/null 2>&1 || [[ -x /opt/p4/bin/simple_switch_grpc ]]; then
  have_bmv2=1
fi
[[ $(id -u) == 0 ]] || { echo "the testbed needs root (network namespaces)"; have_bmv2=0; }

$weft testbed down "$example" >/dev/null 2>&1 || true
trap '$weft testbed down "$example" >/dev/null 2>&1 || true' EXIT

if ((have_bmv2)); then
  echo "== weft testbed up"
  $weft testbed up "$example"
  echo
  echo "== weft apply (every switch answers every entry)"
  $weft apply "$example" --timeout 60s
  echo
  echo "== weft apply again (nothing to write)"
  $weft apply "$example" --timeout 60s | tail -n +1
  echo
  echo "== all-pairs reachability"
  for i in $(seq 1 30); do
    if $weft testbed ping "$example" >/tmp/weft-ping.txt 2>&1; then break; fi
    sleep 1
  done
  cat /tmp/weft-ping.txt
  echo
  echo "== per-spine spread: 2000 packets over 64 UDP flows leaf1-h1 -> leaf3-h1"
  $weft testbed spread "$example" leaf1-h1 leaf3-h1
else
  echo "NOTE: BMv2 simple_switch_grpc is not installed (looked on PATH and in /opt/p4/bin),"
  echo "      so there are no switches to program. Build p4lang/PI and p4lang/behavioral-model"
  echo "      (with PI and Thrift) into /opt/p4 (README, \"BMv2 and p4c\") for the full fabric."
  echo "      Compiling and writing into each switch's SONiC DB instead:"
  echo
  $weft testbed up "$example" --db-only
  echo "== weft plan"
  $weft plan "$example"
  echo
  echo "== weft apply --no-wait (no plugin answers without a switch)"
  $weft apply "$example" --no-wait
fi
