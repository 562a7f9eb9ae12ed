#!/usr/bin/env bash
# PyOpenCL's own tests (Debian's python-pyopencl-doc) on PoCL: plain, under LD_PRELOAD and as an
# OpenCL layer; the pass lists must be identical. Also runs clpeak to the end under the interposer.
#
# Usage: run_pyopencl_suite.sh LIBRARY [OUTDIR]
#   LIBRARY  path of libclpool_interpose.so;  OUTDIR  where logs and lists go (default: a temp dir)
# Env: PYOPENCL_FILES (default: the four allocation-heavy files below), PER_FILE_TIMEOUT (s, default 600),
#      PYTEST_K (a -k expression to run a subset), SKIP_CLPEAK=1, TRACE_DIR (write traces there),
#      WARMUP=0 (skip the first plain run that fills PoCL's kernel cache; its results are not compared),
#      CLPEAK_MODES (default "plain preload"; "preload" alone proves it runs to the end).
# Timings are of warm runs (PoCL's kernel cache filled by the warm-up), so they compare the
# interposer with the driver, not kernel compiles.
# Exit status: 0 when every mode has the same pass list and clpeak finished; 1 otherwise.
set -uo pipefail
lib=$(realpath "$1")
out=${2:-$(mktemp -d)}
mkdir -p "$out"
examples=/usr/share/doc/python-pyopencl-doc/examples
files=${PYOPENCL_FILES:-test_wrapper.py test_enqueue_copy.py test_array.py test_algorithm.py}
per_file=${PER_FILE_TIMEOUT:-600}
py=/usr/bin/python3  # Debian's, which has pyopencl
export PYOPENCL_TEST=portable
export PYOPENCL_NO_CACHE=1  # PyOpenCL's binary cache off; PoCL's kernel cache stays (warm after the first run)
work=$(mktemp -d)
cp "$examples"/test_*.py "$examples"/*.h "$work"/  # test_header_dep_handling includes empty-header.h
# Debian compresses large examples.
for f in "$examples"/test_*.py.gz; do [ -e "$f" ] && gunzip -c "$f" >"$work/$(basename "$f" .gz)"; done

run_mode() {  # mode: warmup | plain | preload | layer
    local mode=$1 start end status=0
    : >"$out/$mode.results"
    : >"$out/$mode.report"
    start=$(date +%s.%N)
    for f in $files; do
        local env=()
        case $mode in
            preload) env=(LD_PRELOAD="$lib" CLPOOL_REPORT=1) ;;
            layer) env=(OPENCL_LAYERS="$lib" CLPOOL_REPORT=1) ;;
        esac
        if [ -n "${TRACE_DIR:-}" ] && [ "$mode" = preload ]; then env+=(CLPOOL_TRACE="$TRACE_DIR/pyopencl-${f%.py}.trace"); fi
        (cd "$work" && env "${env[@]}" timeout "$per_file" "$py" -m pytest -p no:cacheprovider -q -rA \
            ${PYTEST_K:+-k "$PYTEST_K"} "$f") >"$out/$mode.$f.log" 2>&1
        local rc=$?
        [ $rc = 124 ] && echo "TIMEOUT $f" >>"$out/$mode.results"
        [ $rc -gt 1 ] && [ $rc != 124 ] && [ $rc != 5 ] && echo "CRASH($rc) $f" >>"$out/$mode.results"
        grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "$out/$mode.$f.log" | sed -E 's/ - .*//' \
            | sed -E 's/^SKIPPED \[[0-9]+\] /SKIPPED /' >>"$out/$mode.results"
        grep -h '^clpool: interposer' "$out/$mode.$f.log" | sed "s|^|$f: |" >>"$out/$mode.report" || true
    done
    end=$(date +%s.%N)
    sort -o "$out/$mode.results" "$out/$mode.results"
    printf '%s %.1f s: %s passed, %s failed/error, %s timeout/crash\n' "$mode" "$(echo "$end - $start" | bc)" \
        "$(grep -c '^PASSED' "$out/$mode.results")" "$(grep -cE '^(FAILED|ERROR)' "$out/$mode.results")" \
        "$(grep -cE '^(TIMEOUT|CRASH)' "$out/$mode.results")" | tee -a "$out/summary.txt"
    return $status
}

: >"$out/summary.txt"
echo "PyOpenCL $($py -c 'import pyopencl; print(pyopencl.VERSION_TEXT)'), files: $files" | tee -a "$out/summary.txt"
[ "${WARMUP:-1}" = 1 ] && run_mode warmup  # compiles every kernel once into PoCL's cache
run_mode plain
run_mode preload
run_mode layer
ok=0
for mode in preload layer; do
    if diff <(grep '^PASSED' "$out/plain.results") <(grep '^PASSED' "$out/$mode.results") >"$out/$mode.diff"; then
        echo "$mode: pass list identical to plain ($(grep -c '^PASSED' "$out/plain.results") tests)" | tee -a "$out/summary.txt"
    else
        echo "$mode: pass list DIFFERS from plain:" | tee -a "$out/summary.txt"; cat "$out/$mode.diff" | tee -a "$out/summary.txt"
        ok=1
    fi
done
echo "Fail without the interposer too (recorded, not hidden):" | tee -a "$out/summary.txt"
grep -E '^(FAILED|ERROR|TIMEOUT|CRASH)' "$out/plain.results" | sed 's/^/  /' | tee -a "$out/summary.txt"
for mode in preload layer; do
    echo "hit rates ($mode):" | tee -a "$out/summary.txt"; sed 's/^/  /' "$out/$mode.report" | tee -a "$out/summary.txt"
    awk '{for (i = 1; i < NF; ++i) { if ($i == "hits") h += $(i + 1); if ($i == "misses") m += $(i + 1) }}
         END { if (h + m) printf "  all files: hits %d misses %d hit_rate %.1f%%\n", h, m, 100 * h / (h + m) }' \
        "$out/$mode.report" | tee -a "$out/summary.txt"
done

if [ -z "${SKIP_CLPEAK:-}" ]; then
    # clpeak (all its tests; 1.1.2 has no option to cut iterations) must run to the end under the interposer.
    for mode in ${CLPEAK_MODES:-plain preload}; do
        env=()
        [ "$mode" = preload ] && env=(LD_PRELOAD="$lib" CLPOOL_REPORT=1)
        [ -n "${TRACE_DIR:-}" ] && [ "$mode" = preload ] && env+=(CLPOOL_TRACE="$TRACE_DIR/clpeak.trace")
        start=$(date +%s.%N)
        env "${env[@]}" timeout 900 clpeak >"$out/clpeak.$mode.log" 2>&1
        rc=$?
        end=$(date +%s.%N)
        printf 'clpeak %s: exit %d in %.1f s\n' "$mode" "$rc" "$(echo "$end - $start" | bc)" | tee -a "$out/summary.txt"
        grep '^clpool: interposer' "$out/clpeak.$mode.log" | sed 's/^/  /' | tee -a "$out/summary.txt"
        [ $rc = 0 ] || ok=1
    done
fi
echo "logs and lists: $out"
exit $ok
