# The layering rule (docs/DESIGN.md, "Layers"): every header under include/, policies/ and backends/
# includes only the layers it may know, and another layer only through its public headers (never
# its detail/); no cycle between folders; no header outside a layer; no include of a clpool header
# that does not exist. tests/, tools/ and benchmarks/ include public headers too, and a detail/
# header only where tools/lint/layers_detail_allowed.txt lists it with its reason. Offences still
# being removed are listed in tools/lint/layers_known.txt (that list may only shrink). Then the
# checker's own tests. Seconds.
set -euo pipefail
start=$(date +%s)
python3 tools/lint/check_layers.py --known tools/lint/layers_known.txt --allow tools/lint/layers_detail_allowed.txt
python3 tools/lint/check_layers.py --check-doc docs/DESIGN.md
python3 tests/lint/test_check_layers.py
echo "layers: $(( $(date +%s) - start )) s"
