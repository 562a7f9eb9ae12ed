# Include cost (benchmarks/include_cost.py): g++ -fsyntax-only reads the core (pool, policies, host
# backend), <CL/opencl.hpp> as clpool pins it and the umbrella <clpool/clpool.hpp>, interleaved with
# the yardstick (<vector> + <boost/intrusive/list.hpp>), five rounds, medians of CPU time. The bounds
# hold today's costs with room for noise, so that a change which makes every user's build slower
# fails here: the core at most 3.5 yardsticks (it reads 2.8), the umbrella at most 28 (16-23: the
# yardstick is the part that speeds up most on an idle machine) and 22 over CL-HPP alone (12-18). The script's docstring says where the cost goes and why the
# goals (core 2, umbrella 4) are not met. Under a minute.
set -uo pipefail
start=$(date +%s)
python3 benchmarks/include_cost.py --cxx g++ -n 5 --max-core-ratio 3.5 --max-umbrella-ratio 28 --max-umbrella-over-cl 22
rc=$?
echo "include cost: $(( $(date +%s) - start )) s"
exit $rc
