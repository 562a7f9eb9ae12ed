# PyOpenCL's own tests on PoCL: plain, under LD_PRELOAD and as an OpenCL layer; the pass lists
# must be identical. Then clpeak runs to the end under the interposer (docs/DROPIN.md).
# Bounded for a 2-core machine with a cold PoCL kernel cache: test_wrapper.py and
# test_enqueue_copy.py whole, the allocation-heavy part of test_array.py and test_algorithm.py
# (the whole four files take over 30 minutes cold; tools/interposer/run_pyopencl_suite.sh
# without PYTEST_K runs them all), each file at most 5 minutes per mode; no warm-up run (so the
# plain run, first, also compiles the kernels: its time is not a baseline) and clpeak only
# under the interposer.
set -euo pipefail
lib=build/ci/tools/interposer/libclpool_interpose.so
[ -f "$lib" ] || { echo "60-pyopencl: $lib was not built" >&2; exit 1; }
subset="test_wrapper or test_enqueue_copy"
subset+=" or test_mem_pool_with_arrays or test_view or test_slice or test_concatenate or test_event_management"
subset+=" or test_zero_size_array or test_stack or test_get_async or test_outoforderqueue_copy"
subset+=" or test_sum or test_scan or test_copy_if or test_list_builder"
PYTEST_K="$subset" PER_FILE_TIMEOUT=300 WARMUP=0 CLPEAK_MODES=preload \
  bash tools/interposer/run_pyopencl_suite.sh "$lib" build/ci/pyopencl-suite
