#!/usr/bin/env bash
# Runs every cargo fuzz target (fuzz/fuzz_targets) for FUZZ_SECONDS each (default 30) from its
# committed seed corpus (fuzz/corpus/TARGET, copied: what libFuzzer adds stays out of the repo).
# A crash fails the script and leaves its input in fuzz/artifacts/TARGET. Needs the nightly
# toolchain and cargo-fuzz (`rustup toolchain install nightly; cargo install cargo-fuzz`);
# without them it prints SKIPPED (WEFT_REQUIRE_FUZZ=1 makes that a failure).
#   FUZZ_SECONDS=3600 scripts/fuzz.sh p4rt_decoder      # a long run of one target
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-30}
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  if [[ "${WEFT_REQUIRE_FUZZ:-}" == 1 ]]; then
    echo "fuzz: WEFT_REQUIRE_FUZZ=1 but cargo-fuzz or the nightly toolchain is missing" >&2
    exit 1
  fi
  echo "SKIPPED: fuzzing: cargo-fuzz or the nightly toolchain is not installed"
  exit 0
fi
targets=("$@")
((${#targets[@]})) || targets=(intent_loader p4rt_decoder plugin_translate)
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cp -r "fuzz/corpus/$t/." "$work/"
  echo "== fuzz $t for ${secs}s"
  log="$work.log"
  status=0
  CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo +nightly fuzz run "$t" "$work" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1 || status=$?
  grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb|SUMMARY|==[0-9]+==ERROR)" "$log" || true
  if ((status != 0)); then
    tail -40 "$log" >&2
    echo "fuzz: $t failed (exit $status); its input is in fuzz/artifacts/$t" >&2
    exit 1
  fi
  rm -f "$log"
  rm -rf "$work"
done
