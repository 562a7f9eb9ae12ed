# clang-tidy 19 (.clang-tidy: bugprone-*, performance-*, misc-include-cleaner) over the public headers
# changed since the commit named in .ci/tidy-baseline (the last tree tidy passed whole; all of them if
# the file or the commit is missing, or with TIDY_ALL=1), each checked as the main file with the compile
# command of its header-check unit (tests/header_check; tools/lint/run_tidy.py says why), warnings as
# errors. Configures build/tidy (clang, compile database; nothing is built). Findings:
# build/tidy/tidy-findings.txt. About 4 minutes on 2 cores for every header.
set -euo pipefail
start=$(date +%s)
cmake -S . -B build/tidy -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
only=()
base=$(sed -n 's/^\([0-9a-f]\{40\}\).*/\1/p' .ci/tidy-baseline 2>/dev/null | head -1)
if [ "${TIDY_ALL:-0}" != 1 ] && [ -n "$base" ] && git cat-file -e "$base^{commit}" 2>/dev/null; then
  changed=$(git diff --name-only "$base" HEAD -- include backends policies | grep -E '\.(hpp|h)$' |
            sed -E 's#^(include|backends|policies)/##' | sed 's/[.]/[.]/g' | paste -sd'|' -)
  if [ -z "$changed" ]; then
    echo "tidy: no public header changed since ${base:0:12}"
    exit 0
  fi
  echo "tidy: the headers changed since ${base:0:12}"
  only=(--header "^($changed)\$")
fi
rc=0
python3 tools/lint/run_tidy.py build/tidy -j "$(nproc)" --clang-tidy clang-tidy-19 "${only[@]}" || rc=$?
echo "tidy: $(( $(date +%s) - start )) s"
exit $rc
