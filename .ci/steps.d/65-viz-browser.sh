# clpool-viz's report in a real browser. snapshot_demo writes a snapshot, clpool-viz
# makes the report, headless Chromium (Debian's chromium, .ci/deps.d/viz.txt) renders it and
# tests/tools/browser_check.py reads the DOM through the page's documented hooks: one drawn block
# per buffer, one per segment block, the timeline's series and points and its bytes against the
# pool's peak, the out-of-memory marks, no console message. Also on a pending buffer that completed
# before the snapshot (snapshot_demo --pending-completed), and on the
# hand-made version 2 example (tests/data/viz/snapshot_v2.json: history, segments, an OOM).
# The same check must fail on a copy of the page with a script error (the check can fail).
set -euo pipefail
build=build/ci
demo=$build/tools/snapshot_demo
[ -x "$demo" ] || { echo "65-viz-browser: $demo was not built" >&2; exit 1; }
out=$build/viz-browser
mkdir -p "$out"
"$demo" "$out/snapshot.json"
python3 tools/viz/clpool-viz "$out/snapshot.json" -o "$out/report.html"
python3 tests/tools/browser_check.py "$out/report.html" "$out/snapshot.json"
sed 's|render(JSON.parse|render(undefined_function(), JSON.parse|' "$out/report.html" > "$out/broken.html"
python3 tests/tools/browser_check.py "$out/broken.html" "$out/snapshot.json" --expect-error
"$demo" --pending-completed "$out/pending-completed.json"
python3 tools/viz/clpool-viz "$out/pending-completed.json" -o "$out/pending-completed.html"
python3 tests/tools/browser_check.py "$out/pending-completed.html" "$out/pending-completed.json"
python3 tools/viz/clpool-viz tests/data/viz/snapshot_v2.json -o "$out/v2.html"
python3 tests/tools/browser_check.py "$out/v2.html" tests/data/viz/snapshot_v2.json
