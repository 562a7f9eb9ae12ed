# Include cost (benchmarks/include_cost.py): g++ -fsyntax-only reads the core (pool, policies, host
# backend), <CL/opencl.hpp> as clpool pins it and the umbrella <clpool/clpool.hpp>, interleaved with
# the yardstick (<vector> + <boost/intrusive/list.hpp>), five rounds, medians of CPU time. Fails when
# the core costs more than 2 yardsticks, or the umbrella more than 8, or more than 4 over CL-HPP
# alone: CL-HPP by itself costs about 4, which no umbrella offering the OpenCL pools can avoid (the
# script's docstring says why the umbrella has these two bounds). Under a minute.
set -uo pipefail
start=$(date +%s)
python3 benchmarks/include_cost.py --cxx g++ -n 5 --max-core-ratio 2 --max-umbrella-ratio 8 --max-umbrella-over-cl 4
rc=$?
echo "include cost: $(( $(date +%s) - start )) s"
exit $rc
