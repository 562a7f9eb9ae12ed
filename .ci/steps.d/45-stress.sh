# Stress at full scale (docs/RELIABILITY.md): 8 threads, every lock policy, mock/host/OpenCL (PoCL).
# ctest already ran it at 2% scale; this is the million-operation run, bounded to 10 minutes.
set -euo pipefail
start=$(date +%s)
timeout 600 build/ci/tests/clpool_stress --duration=true
echo "stress: $(( $(date +%s) - start )) s"
