#!/usr/bin/env bash
# The test command: set-up (idempotent), formatting and lint gates, every test of the workspace
# (unit, golden, integration against real redis-server and, where installed, real BMv2), and the
# packet tests of the P4 pipeline. Set WEFT_REQUIRE_BMV2=1 to fail instead of skipping BMv2 tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}

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
