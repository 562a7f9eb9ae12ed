#!/usr/bin/env bash
# Pack one run folder of docs/results/ the way docs/results/README.md describes:
# every file over 8 KiB that is not a .md or .svg goes into <folder>/raw.tar.xz,
# everything else (commit.txt, commands, summaries, plots, small logs) stays plain.
#
# usage: benchmarks/gpu/pack_results.sh docs/results/<date>-<device>/<run> [...]
#
# The archive is reproducible: names sorted, fixed mtime/owner/mode, xz -9 on
# one thread. Each file is checked (sha256) against the archive before it is
# removed; a folder with nothing over the limit is left as it is.
set -euo pipefail

LIMIT=${LIMIT:-8192}
MTIME=${MTIME:-2026-11-23 00:00:00Z}

for dir in "$@"; do
    dir=${dir%/}
    [ -d "$dir" ] || { echo "not a folder: $dir" >&2; exit 1; }
    [ ! -e "$dir/raw.tar.xz" ] || { echo "$dir/raw.tar.xz exists already" >&2; exit 1; }
    mapfile -t heavy < <(cd "$dir" && find . -maxdepth 1 -type f -size +"${LIMIT}"c \
        ! -name '*.md' ! -name '*.svg' -printf '%f\n' | LC_ALL=C sort)
    if [ ${#heavy[@]} -eq 0 ]; then
        echo "$dir: nothing over $LIMIT bytes, left plain"
        continue
    fi
    (cd "$dir" && XZ_OPT='-9 -T1' tar -cJf raw.tar.xz --sort=name --mtime="$MTIME" \
        --owner=0 --group=0 --numeric-owner --mode='u=rw,go=r' --format=gnu -- "${heavy[@]}")
    tmp=$(mktemp -d)
    tar -xJf "$dir/raw.tar.xz" -C "$tmp"
    for f in "${heavy[@]}"; do
        cmp -s "$dir/$f" "$tmp/$f" || { echo "$dir/$f differs in the archive" >&2; rm -rf "$tmp"; exit 1; }
    done
    rm -rf "$tmp"
    (cd "$dir" && rm -f -- "${heavy[@]}")
    echo "$dir: ${#heavy[@]} files -> raw.tar.xz ($(stat -c %s "$dir/raw.tar.xz") bytes)"
done
