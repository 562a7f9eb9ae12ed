set -e
cd "$(dirname "$0")/../../../.."
F="-std=c++20 -O3 -DNDEBUG -Iinclude -Ipolicies -Ibackends -Ibenchmarks/include"
g++ $F docs/results/2026-11-27-h100/history-loop-shapes/loop_shapes.cpp -o /tmp/loop -lOpenCL -lpthread &
g++ $F docs/results/2026-11-27-h100/history-loop-shapes/gb_hit.cpp -o /tmp/gb -lOpenCL -lbenchmark -lpthread &
wait
lscpu | grep "Model name"
taskset -c 3 /tmp/loop
mt=0.2; if /tmp/gb --benchmark_min_time=0.01s --benchmark_filter=NONE >/dev/null 2>&1; then mt=0.2s; fi
taskset -c 3 /tmp/gb --benchmark_min_time=$mt --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true 2>&1 | grep -E "_median|_min" || taskset -c 3 /tmp/gb --benchmark_min_time=$mt --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
