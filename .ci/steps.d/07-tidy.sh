# clang-tidy 19 (.clang-tidy: bugprone-*, performance-*, misc-include-cleaner) over every public header,
# each checked as the main file with the compile command of its header-check unit (tests/header_check;
# tools/lint/run_tidy.py says why), warnings as errors, on every core. Configures build/tidy (clang,
# compile database; nothing is built). Findings: build/tidy/tidy-findings.txt. About 2-4 minutes on 2 cores.
set -euo pipefail
start=$(date +%s)
cmake -S . -B build/tidy -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
rc=0
python3 tools/lint/run_tidy.py build/tidy -j "$(nproc)" --clang-tidy clang-tidy-19 || rc=$?
echo "tidy: $(( $(date +%s) - start )) s"
exit $rc
