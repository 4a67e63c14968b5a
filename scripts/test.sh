#!/usr/bin/env bash
# The test command: set-up (idempotent), formatting and lint gates, every test of the workspace
# (unit, golden, integration against real redis-server and, where installed, real BMv2), and the
# packet tests of the P4 pipeline. Where BMv2 is installed every BMv2 test runs or fails (a
# missing prerequisite beside it is a failure); WEFT_REQUIRE_BMV2=0 allows skipping them,
# WEFT_REQUIRE_BMV2=1 fails them even without BMv2. The last line says how many ran on BMv2 and
# how many skipped, and why.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
# Every BMv2 test (Rust and pytest) appends "ran<TAB>TEST" or "skipped<TAB>TEST<TAB>WHY" here.
WEFT_TEST_LEDGER=$(mktemp "${TMPDIR:-/tmp}/weft-bmv2-ledger.XXXXXX")
export WEFT_TEST_LEDGER
bmv2_summary() {
  # A test's last record counts (a harness may record "ran", then find a prerequisite missing).
  awk -F'\t' '
    { last[$2] = $1; why[$2] = $3 }
    END {
      for (t in last) if (last[t] == "ran") ran++; else { skipped++; reasons[why[t]]++ }
      line = sprintf("BMv2 tests: %d ran on BMv2, %d skipped", ran, skipped)
      sep = " ("
      for (r in reasons) { line = line sep reasons[r] " × " r; sep = "; " }
      if (skipped) line = line ")"
      print line
    }' "$WEFT_TEST_LEDGER"
  rm -f "$WEFT_TEST_LEDGER"
}
trap bmv2_summary EXIT
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
