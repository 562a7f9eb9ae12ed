#!/usr/bin/env bash
# Instructions per hit pair, history off and on, for each tree's headers (hit_pair_instructions.cpp
# under callgrind): the difference of two runs (6,400 and 12,800 pairs) over 6,400, so set-up and
# the stage's flushes at the edges cancel out. Deterministic, unlike a timing on a shared host; with
# the history on every pool ran at about the same instructions per cycle on the H100 host
# (docs/BENCHMARKS.md), so there the count predicts the time.
#   TREES="name=path ..."   earlier source trees (e.g. from `git archive`); this tree is "after"
#   HISTORY="0 65536"
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "hit_pair_instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
count() {  # binary pool events pairs
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --toggle-collect='void hit_pair_body*' "$@" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
names=(nolock single tc)  # hit_pair_instructions.cpp's POOL 0, 1, 2
for tree in ${TREES:-} after=$PWD; do
  side=${tree%%=*}; src=${tree#*=}
  ${CXX:-g++} -std=c++20 -O3 -DNDEBUG -I"$src/include" -I"$src/policies" -I"$src/backends" \
    benchmarks/gpu/hit_pair_instructions.cpp -o "$work/$side" -lpthread
  for h in ${HISTORY:-0 65536}; do
    line="$side history=$h"
    for pool in 0 1 2; do
      a=$(count "$work/$side" "$pool" "$h" 6400)
      b=$(count "$work/$side" "$pool" "$h" 12800)
      line="$line ${names[pool]} $(( (b - a) / 6400 ))"
    done
    echo "$line"
  done
done
