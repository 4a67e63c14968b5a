#!/usr/bin/env bash
# The main job on the small example fabric: set up, build, validate and summarise every example.
# Later stages (compile, apply through SONiC Redis, BMv2 testbed) join this script as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release -q -j2 -p weft-controller
weft=target/release/weft
example=${1:-topology/examples/leaf-spine-small.yaml}
echo "== weft validate topology/examples/*.yaml"
$weft validate topology/examples/*.yaml
echo
echo "== weft show $example --switches"
$weft show "$example" --switches
