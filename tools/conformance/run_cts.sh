#!/usr/bin/env bash
# OpenCL-CTS suites (built by build_cts.sh) on the default OpenCL device: plain, under LD_PRELOAD
# and as an OpenCL layer (OPENCL_LAYERS). The pass lists must be identical (docs/CONFORMANCE.md).
#
# Usage: run_cts.sh LIBRARY CTS_BUILD [OUTDIR]
#   LIBRARY    path of libclpool_interpose.so;  CTS_BUILD  build_cts.sh's BUILD_DIR/build
#   OUTDIR     where logs, JSON results and lists go (default: a temp dir)
# Env: CTS_SUITES (default "buffers api mem_host_flags events svm"),
#      CTS_TESTS_<suite> (sub-tests to run, names or '*' patterns; default all of the suite),
#      CTS_EXCLUDE_<suite> (sub-tests left out of CTS_TESTS_<suite> or of the whole suite: the CTS
#        harness has no exclude option, so the script names every other sub-test),
#      CTS_TIMESTAMPS=1 (prefix each log line with the seconds since the suite started),
#      MODES (default "plain preload layer"), PER_SUITE_TIMEOUT (s, default 1200),
#      MIN_PLAIN_PASSES (fail when the plain run passes fewer; default 0).
# Writes OUTDIR/MODE.results ("suite/test status", sorted), OUTDIR/MODE.report (the interposer's
# exit reports) and OUTDIR/summary.txt.
# Exit status: 0 when every mode has the same pass list, every interposed suite printed its exit
# report with hits, and plain passed at least MIN_PLAIN_PASSES; 1 otherwise.
set -uo pipefail
lib=$(realpath "$1")
bin=$(realpath "$2")/test_conformance
out=${3:-$(mktemp -d)}
mkdir -p "$out"
suites=${CTS_SUITES:-buffers api mem_host_flags events svm}
modes=${MODES:-plain preload layer}
per_suite=${PER_SUITE_TIMEOUT:-1200}
status=0
: >"$out/summary.txt"

suite_exe() {  # the suite's program: test_conformance/<suite>/test_<suite> (SVM's folder is upper case)
    local s=$1 found
    found=$(find "$bin" -maxdepth 2 -type f -name "test_$s" | head -1)
    echo "${found:-$bin/$s/test_$s}"
}

run_mode() {  # mode: plain | preload | layer
    local mode=$1 start end
    : >"$out/$mode.results"
    : >"$out/$mode.report"
    start=$(date +%s.%N)
    for s in $suites; do
        local env=() tests json="$out/$mode.$s.json" tests_var="CTS_TESTS_$s" exclude_var="CTS_EXCLUDE_$s"
        tests=${!tests_var:-}
        if [ -n "${!exclude_var:-}" ]; then
            # shellcheck disable=SC2086
            tests=$("$(suite_exe "$s")" --list 2>/dev/null | grep -P '^\t\S+$' | tr -d '\t' | python3 -c '
import fnmatch, sys
want, drop = sys.argv[1].split(), set(sys.argv[2].split())
for name in sys.stdin.read().split():
    if (not want or any(fnmatch.fnmatch(name, w) for w in want)) and name not in drop:
        print(name)' "$tests" "${!exclude_var}")
        fi
        case $mode in
            preload) env=(LD_PRELOAD="$lib" CLPOOL_REPORT=1) ;;
            layer) env=(OPENCL_LAYERS="$lib" CLPOOL_REPORT=1) ;;
        esac
        rm -f "$json"
        local stamp=(cat)
        [ "${CTS_TIMESTAMPS:-0}" = 1 ] && stamp=(python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin: print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)')
        # shellcheck disable=SC2086  # the sub-test list is words on purpose
        env "${env[@]}" CL_CONFORMANCE_RESULTS_FILENAME="$json" timeout "$per_suite" \
            "$(suite_exe "$s")" $tests 2>&1 | "${stamp[@]}" >"$out/$mode.$s.log"
        local rc=${PIPESTATUS[0]}
        # The harness exits 1 when a sub-test fails; the JSON (written at the end) is the record.
        if [ -f "$json" ]; then
            python3 - "$json" "$s" >>"$out/$mode.results" <<'PY'
import json, sys
for name, result in json.load(open(sys.argv[1]))["results"].items():
    print(f"{sys.argv[2]}/{name} {result}")
PY
        fi
        [ "$rc" = 124 ] && echo "$s/TIMEOUT after ${per_suite}s" >>"$out/$mode.results"
        [ "$rc" -gt 1 ] && [ "$rc" != 124 ] && echo "$s/CRASH exit $rc" >>"$out/$mode.results"
        [ ! -f "$json" ] && [ "$rc" -le 1 ] && echo "$s/NO-RESULTS exit $rc" >>"$out/$mode.results"
        if [ "$mode" != plain ]; then
            if ! grep -hE '^( *[0-9.]+ )?clpool: interposer' "$out/$mode.$s.log" | sed -E "s|^ *[0-9.]* ?|$s: |" >>"$out/$mode.report"; then
                echo "$mode $s: no exit report: the interposer was not loaded" | tee -a "$out/summary.txt"
                status=1
            fi
        fi
    done
    end=$(date +%s.%N)
    sort -o "$out/$mode.results" "$out/$mode.results"
    printf '%s %.1f s: %s pass, %s fail, %s skip, %s other (timeout, crash)\n' "$mode" \
        "$(echo "$end - $start" | bc)" "$(grep -c ' pass$' "$out/$mode.results")" \
        "$(grep -c ' fail$' "$out/$mode.results")" "$(grep -c ' skip$' "$out/$mode.results")" \
        "$(grep -vcE ' (pass|fail|skip)$' "$out/$mode.results")" | tee -a "$out/summary.txt"
}

echo "OpenCL-CTS suites: $suites; modes: $modes" | tee -a "$out/summary.txt"
for mode in $modes; do run_mode "$mode"; done

first=${modes%% *}
grep ' pass$' "$out/$first.results" >"$out/$first.passed"
for mode in $modes; do
    [ "$mode" = "$first" ] && continue
    grep ' pass$' "$out/$mode.results" >"$out/$mode.passed"
    if ! diff -u "$out/$first.results" "$out/$mode.results" >"$out/$mode.diff"; then
        if cmp -s "$out/$first.passed" "$out/$mode.passed"; then
            echo "$mode: same pass list as $first; other results differ:" | tee -a "$out/summary.txt"
        else
            echo "$mode: pass list DIFFERS from $first:" | tee -a "$out/summary.txt"
            status=1
        fi
        grep -E '^[-+][^-+]' "$out/$mode.diff" | tee -a "$out/summary.txt"
    else
        echo "$mode: results identical to $first" | tee -a "$out/summary.txt"
    fi
    if [ "$mode" != plain ] && ! grep -Eq ' hits [1-9]' "$out/$mode.report"; then
        echo "$mode: the interposer pooled nothing (no hits in any exit report)" | tee -a "$out/summary.txt"
        status=1
    fi
done
if [[ " $modes " == *" plain "* ]]; then
    plain_passes=$(grep -c ' pass$' "$out/plain.results")
    if [ "$plain_passes" -lt "${MIN_PLAIN_PASSES:-0}" ]; then
        echo "plain: $plain_passes passes, fewer than the expected ${MIN_PLAIN_PASSES}" | tee -a "$out/summary.txt"
        status=1
    fi
fi
echo "not passing in $first: $(grep -v ' pass$' "$out/$first.results" | tr '\n' ';')" >>"$out/summary.txt"
exit $status
