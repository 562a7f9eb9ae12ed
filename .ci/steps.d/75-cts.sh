# OpenCL-CTS (Khronos' conformance suites) on PoCL: plain, under LD_PRELOAD and as an OpenCL
# layer. The pass lists must be identical, and plain must pass at least what it passed when this
# subset was chosen (docs/CONFORMANCE.md). The CTS is built out of tree from ../shared/third_party/
# by tools/conformance/build_cts.sh (nothing vendored); set CTS_THIRD_PARTY if it lies elsewhere.
# Bounded for 2 cores (docs/CONFORMANCE.md has the times): mem_host_flags and events whole; api
# whole but for three kernel-compile-heavy sub-tests and set_command_queue_property (PoCL 3.1
# crashes in it, interposer or not); buffers with one integer type and the struct per family
# (every type runs the same host code; buffer_write_async_* take 20 s each); SVM whole (its 16
# sub-tests take 37 s plain with a cold kernel cache, 5-7 s a mode warm). The whole four buffer
# suites take about 10 minutes per mode: tools/conformance/run_cts.sh without CTS_TESTS_* runs them.
set -euo pipefail
lib=build/ci/tools/interposer/libclpool_interpose.so
[ -f "$lib" ] || { echo "75-cts: $lib was not built" >&2; exit 1; }
start=$(date +%s)
CTS_TARGETS="test_buffers test_api test_mem_host_flags test_events test_svm" bash tools/conformance/build_cts.sh build/ci/cts
echo "75-cts: CTS built in $(( $(date +%s) - start )) s"
export CTS_TESTS_buffers="array_info_size buffer_copy buffer_partial_copy buffer_fill_int buffer_fill_struct
  buffer_map_read_int buffer_map_read_struct buffer_map_write_int buffer_map_write_struct buffer_migrate
  buffer_read_array_barrier_int buffer_read_async_int buffer_write_async_int buffer_read_int buffer_read_struct
  buffer_read_half buffer_read_random_size buffer_write_int buffer_write_struct buffer_write_half
  image_migrate immutable_buffer_map_int write_from_immutable_buffer_to_buffer
  mem_alloc_ref_flags mem_copy_host_flags mem_read_only_flags mem_read_write_flags mem_write_only_flags
  sub_buffers_overlapping sub_buffers_read_write sub_buffers_read_write_dual_devices"
export CTS_EXCLUDE_api="set_command_queue_property kernel_attributes kernel_arg_multi_setup_random get_kernel_arg_info"
run_start=$(date +%s)
CTS_SUITES="buffers api mem_host_flags events svm" CTS_TIMESTAMPS=1 PER_SUITE_TIMEOUT=480 MIN_PLAIN_PASSES=210 \
  bash tools/conformance/run_cts.sh "$lib" build/ci/cts/build build/ci/cts-results
echo "75-cts: suites run in $(( $(date +%s) - run_start )) s (three modes)"
