#!/usr/bin/env bash
# Compile Weft's P4 programs with p4c (v1model, BMv2) into the committed outputs.
#
#   p4/compile.sh           regenerate p4/build/weft.{json,p4info.txtpb,p4info.json,p4info.bin}
#                           and p4/bench/minimal_l3.{json,p4info.txtpb}
#   p4/compile.sh --check   compile into a temporary directory and fail if any committed output
#                           differs (stale); prints SKIPPED and succeeds when p4c is absent
#
# p4c is looked up on PATH, then in /opt/p4/bin. Only our own programs are compiled here; p4c
# itself is built outside the repo (see DEVELOPERS.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mode="write"
case "${1:-}" in
    "") ;;
    --check) mode="check" ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

p4c_bin="$(command -v p4c || true)"
if [[ -z "$p4c_bin" && -x /opt/p4/bin/p4c ]]; then
    p4c_bin=/opt/p4/bin/p4c
fi
if [[ -z "$p4c_bin" ]]; then
    if [[ "$mode" == "check" ]]; then
        echo "SKIPPED: p4/compile.sh --check: p4c not found on PATH or in /opt/p4/bin; committed outputs not verified"
        exit 0
    fi
    echo "error: p4c not found on PATH or in /opt/p4/bin" >&2
    exit 1
fi

# compile SRC OUTDIR NAME INFO_EXTS: SRC relative to p4/, outputs OUTDIR/NAME.json and
# OUTDIR/NAME.p4info.<ext> for each ext.
compile() {
    local src="$1" outdir="$2" name="$3" exts="$4" files="" ext
    for ext in $exts; do
        files="${files:+$files,}$outdir/$name.p4info.$ext"
    done
    # Relative paths and a fixed working directory keep the outputs identical between machines.
    (cd "$here" && "$p4c_bin" --target bmv2 --arch v1model --std p4-16 \
        -o "$outdir" --p4runtime-files "$files" "$src")
    # p4c names the JSON after the source file.
    local produced="$outdir/$(basename "${src%.p4}").json"
    if [[ "$produced" != "$outdir/$name.json" ]]; then
        mv "$produced" "$outdir/$name.json"
    fi
    rm -f "$outdir/$(basename "${src%.p4}").p4i"
    # p4c records the path of its preprocessed file, which depends on the output directory;
    # name the source instead so that the output only depends on the sources.
    sed -i -e "s|\"program\" : \"[^\"]*\"|\"program\" : \"$src\"|" "$outdir/$name.json"
    # One metadata field per p4c temporary costs every packet a reset: share them between
    # actions (share_temps.py says why and when it is safe). python3 is there wherever p4c is
    # (p4c's driver is a Python script).
    python3 "$here/share_temps.py" "$outdir/$name.json"
}

if [[ "$mode" == "write" ]]; then
    compile weft.p4 "$here/build" weft "txtpb json bin"
    compile bench/minimal_l3.p4 "$here/bench" minimal_l3 "txtpb"
    echo "p4/compile.sh: outputs written with $("$p4c_bin" --version | head -n1)"
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build" "$tmp/bench"
compile weft.p4 "$tmp/build" weft "txtpb json bin"
compile bench/minimal_l3.p4 "$tmp/bench" minimal_l3 "txtpb"
stale=0
for f in build/weft.json build/weft.p4info.txtpb build/weft.p4info.json build/weft.p4info.bin \
         bench/minimal_l3.json bench/minimal_l3.p4info.txtpb; do
    if ! cmp -s "$tmp/$f" "$here/$f"; then
        echo "STALE: p4/$f differs from what $("$p4c_bin" --version | head -n1) produces from the sources; run p4/compile.sh" >&2
        stale=1
    fi
done
if [[ "$stale" -ne 0 ]]; then
    exit 1
fi
echo "p4/compile.sh --check: committed outputs are what $("$p4c_bin" --version | head -n1) produces"
