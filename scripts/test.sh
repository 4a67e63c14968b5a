#!/usr/bin/env bash
# The test command: set-up (idempotent), formatting and lint gates, every test of the workspace
# (unit, golden, integration against real redis-server and, where installed, real BMv2), and the
# packet tests of the P4 pipeline. Set WEFT_REQUIRE_BMV2=1 to fail instead of skipping BMv2 tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
# setup.sh installs etcd-server: the `weft run --ha` tests fail rather than skip without it.
export WEFT_REQUIRE_ETCD=${WEFT_REQUIRE_ETCD:-1}
# ... and chromium, chromium-driver and promtool: the fabric page's browser test and the alert
# rules' promtool tests fail rather than skip without them.
export WEFT_REQUIRE_BROWSER=${WEFT_REQUIRE_BROWSER:-1}
export WEFT_REQUIRE_PROMTOOL=${WEFT_REQUIRE_PROMTOOL:-1}

scripts/setup.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -q -- -D warnings
echo "== man pages (target/man)"
cargo run -q -p weft-controller --bin weft -- manpages "${CARGO_TARGET_DIR:-target}/man"
echo "== cargo test"
cargo test --workspace -j2 --no-fail-fast -- --test-threads=2
if compgen -G "p4/tests/test_*.py" >/dev/null; then
  echo "== pytest p4/tests"
  PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python .venv/bin/python -m pytest -q p4/tests
fi
if [[ -n "${WEFT_FUZZ_SECONDS:-}" ]]; then
  # Off by default: building the fuzz targets (nightly, sanitizers) takes ~15 min on 2 cores.
  echo "== fuzz (scripts/fuzz.sh, ${WEFT_FUZZ_SECONDS}s per target)"
  FUZZ_SECONDS=$WEFT_FUZZ_SECONDS scripts/fuzz.sh
fi
