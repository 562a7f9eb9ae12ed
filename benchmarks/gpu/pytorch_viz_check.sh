#!/usr/bin/env bash
# On the GPU machine, where PyTorch is installed: does PyTorch's own memory viewer read
# what `clpool-viz --pytorch` writes? Runs torch.cuda._memory_viz on the pickle of the hand-made
# version 2 snapshot (tests/data/viz/snapshot_v2.json) and, if given, of more snapshots:
#   trace_plot and segment_plot (the HTML of pytorch.org/memory_viz; they embed the pickle),
#   stats (segsum: walks every block, asserts the sizes add up) and trace (replays device_traces).
# Run from the repo root: bash benchmarks/gpu/pytorch_viz_check.sh [more.json ...]
# Writes $OUT (or ./out)/pytorch_viz/; exits non-zero if any step fails.
set -uo pipefail
out=${OUT:-./out}/pytorch_viz
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__)' | tee "$out/versions.txt" || { echo "no PyTorch here" >&2; exit 1; }
status=0
for snap in tests/data/viz/snapshot_v2.json "$@"; do
  name=$(basename "$snap" .json)
  pickle=$out/$name.pickle
  python3 tools/viz/clpool-viz "$snap" --pytorch "$pickle" || { echo "FAIL clpool-viz $snap"; status=1; continue; }
  for step in trace_plot segment_plot; do
    if python3 -m torch.cuda._memory_viz "$step" "$pickle" -o "$out/$name.$step.html" 2>"$out/$name.$step.err" \
       && [ -s "$out/$name.$step.html" ]; then
      echo "ok   $name $step ($(wc -c <"$out/$name.$step.html") bytes)"
    else
      echo "FAIL $name $step: $(tail -3 "$out/$name.$step.err")"; status=1
    fi
  done
  for step in stats trace; do
    if python3 -m torch.cuda._memory_viz "$step" "$pickle" >"$out/$name.$step.txt" 2>"$out/$name.$step.err"; then
      echo "ok   $name $step: $(grep -m1 -E 'total_reserved|entries' "$out/$name.$step.txt")"
    else
      echo "FAIL $name $step: $(tail -3 "$out/$name.$step.err")"; status=1
    fi
  done
done
echo "exit $status" | tee "$out/result.txt"
exit $status
