# The interposer's tests: C programs linked only with -lOpenCL, run plain, under LD_PRELOAD
# and as an OpenCL layer. CLPOOL_INTERPOSER tells a program the interposer must be there.
enable_language(C)
set(_lib $<TARGET_FILE:clpool_interpose>)
foreach(prog interpose_semantics interpose_fences interpose_holders interpose_conformance interpose_fork interpose_svm)
  add_executable(${prog} ${CMAKE_CURRENT_SOURCE_DIR}/tests/${prog}.c)
  target_link_libraries(${prog} PRIVATE OpenCL::OpenCL)
  target_link_libraries(${prog} PRIVATE clpool_warnings)
  add_dependencies(${prog} clpool_interpose)
  add_test(NAME ${prog}.plain COMMAND ${prog})
  add_test(NAME ${prog}.preload COMMAND ${prog})
  set_tests_properties(${prog}.preload PROPERTIES ENVIRONMENT "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib}")
  add_test(NAME ${prog}.layer COMMAND ${prog})
  set_tests_properties(${prog}.layer PROPERTIES ENVIRONMENT "OPENCL_LAYERS=${_lib};CLPOOL_INTERPOSER=${_lib}")
endforeach()

# Built with interpose_semantics, so scripts that build only that target (benchmarks/gpu/interposer.sh)
# still find every program `ctest -R interpose` runs.
add_dependencies(interpose_semantics interpose_fences interpose_holders interpose_conformance interpose_fork
                 interpose_svm)

# The exit report (CLPOOL_REPORT=1) and the trace (CLPOOL_TRACE), from both fronts.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
foreach(mode preload layer)
  add_test(NAME interpose_report_trace.${mode}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_and_trace.sh $<TARGET_FILE:interpose_semantics> ${_lib} ${mode})
endforeach()

# The exit report's per-pool hits leave out rewaits, as its total does (the pools' hits add up to it).
add_executable(interpose_report_rewait ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_report_rewait.c)
target_link_libraries(interpose_report_rewait PRIVATE OpenCL::OpenCL clpool_warnings ${CMAKE_DL_LIBS})
add_dependencies(interpose_semantics interpose_report_rewait)
add_test(NAME interpose_report_rewait.plain COMMAND interpose_report_rewait)
foreach(mode preload layer)
  add_test(NAME interpose_report_rewait.${mode}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_rewait.sh $<TARGET_FILE:interpose_report_rewait>
                   ${_lib} ${mode})
endforeach()

# CLPOOL_SNAPSHOT: the snapshot on SIGUSR1 and at exit (snapshot_check.py runs the program).
add_executable(interpose_snapshot ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_snapshot.c)
target_link_libraries(interpose_snapshot PRIVATE OpenCL::OpenCL clpool_warnings ${CMAKE_DL_LIBS})
add_dependencies(interpose_semantics interpose_snapshot)
foreach(mode preload layer)
  add_test(NAME interpose_snapshot.${mode}
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_SOURCE_DIR}/tests/snapshot_check.py
                   $<TARGET_FILE:interpose_snapshot> ${_lib} ${mode})
endforeach()

# Out of host memory: the program's own operator new throws std::bad_alloc on demand (exported
# with -rdynamic so the interposer's calls reach it; -fexceptions to unwind through it).
add_executable(interpose_bad_alloc ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_bad_alloc.c)
target_link_libraries(interpose_bad_alloc PRIVATE OpenCL::OpenCL clpool_warnings ${CMAKE_DL_LIBS} stdc++)
target_compile_options(interpose_bad_alloc PRIVATE -fexceptions)
set_target_properties(interpose_bad_alloc PROPERTIES ENABLE_EXPORTS ON)
add_dependencies(interpose_semantics interpose_bad_alloc)
add_test(NAME interpose_bad_alloc.plain COMMAND interpose_bad_alloc)
add_test(NAME interpose_bad_alloc.preload COMMAND interpose_bad_alloc)
set_tests_properties(interpose_bad_alloc.preload PROPERTIES ENVIRONMENT "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib}")
add_test(NAME interpose_bad_alloc.layer COMMAND interpose_bad_alloc)
set_tests_properties(interpose_bad_alloc.layer PROPERTIES ENVIRONMENT "OPENCL_LAYERS=${_lib};CLPOOL_INTERPOSER=${_lib}")

# Out of memory: a test layer below makes the driver fail past 4 MiB of live buffers.
find_package(Threads REQUIRED)
target_link_libraries(interpose_fork PRIVATE Threads::Threads)
target_link_libraries(interpose_svm PRIVATE Threads::Threads)
add_library(clpool_fake_oom_layer MODULE ${CMAKE_CURRENT_SOURCE_DIR}/tests/fake_oom_layer.c)
target_link_libraries(clpool_fake_oom_layer PRIVATE OpenCL::OpenCL Threads::Threads clpool_warnings)
add_executable(interpose_oom ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_oom.c)
target_link_libraries(interpose_oom PRIVATE OpenCL::OpenCL Threads::Threads ${CMAKE_DL_LIBS} clpool_warnings)
add_dependencies(interpose_oom clpool_interpose clpool_fake_oom_layer)
set(_fake $<TARGET_FILE:clpool_fake_oom_layer>)
add_test(NAME interpose_oom.plain COMMAND interpose_oom)
set_tests_properties(interpose_oom.plain PROPERTIES ENVIRONMENT "OPENCL_LAYERS=${_fake};FAKE_OOM_BYTES=4194304")
add_test(NAME interpose_oom.preload COMMAND interpose_oom)
set_tests_properties(interpose_oom.preload PROPERTIES
  ENVIRONMENT "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib};OPENCL_LAYERS=${_fake};FAKE_OOM_BYTES=4194304")

# CLPOOL_SNAPSHOT at exit while a thread the test layer parks inside the core's lock blocks a SIGUSR1
# snapshot: the process must still end (the program's alarm() and TIMEOUT make a hang a failure).
add_executable(interpose_snapshot_exit ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_snapshot_exit.c)
target_link_libraries(interpose_snapshot_exit PRIVATE OpenCL::OpenCL Threads::Threads ${CMAKE_DL_LIBS} clpool_warnings)
add_dependencies(interpose_snapshot_exit clpool_interpose clpool_fake_oom_layer)
add_dependencies(interpose_semantics interpose_snapshot_exit)
add_test(NAME interpose_snapshot_exit.preload COMMAND interpose_snapshot_exit)
set_tests_properties(interpose_snapshot_exit.preload PROPERTIES TIMEOUT 60 ENVIRONMENT
  "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib};OPENCL_LAYERS=${_fake};FAKE_OOM_BYTES=4194304;CLPOOL_SNAPSHOT=${CMAKE_CURRENT_BINARY_DIR}/snapshot_exit.json")

# fork() while the trace writer (CLPOOL_TRACE) or the snapshot writer (CLPOOL_SNAPSHOT, on SIGUSR1) is
# busy: the child's own trace lines and its exit snapshot must not wait for a thread it does not have.
foreach(mode preload layer)
  if(mode STREQUAL "preload")
    set(_front "LD_PRELOAD=${_lib}")
  else()
    set(_front "OPENCL_LAYERS=${_lib}")
  endif()
  add_test(NAME interpose_fork_trace.${mode} COMMAND interpose_fork)
  set_tests_properties(interpose_fork_trace.${mode} PROPERTIES TIMEOUT 200 ENVIRONMENT
    "${_front};CLPOOL_INTERPOSER=${_lib};CLPOOL_TRACE=${CMAKE_CURRENT_BINARY_DIR}/fork_trace.${mode}.txt")
  add_test(NAME interpose_fork_snapshot.${mode} COMMAND interpose_fork)
  set_tests_properties(interpose_fork_snapshot.${mode} PROPERTIES TIMEOUT 200 ENVIRONMENT
    "${_front};CLPOOL_INTERPOSER=${_lib};CLPOOL_SNAPSHOT=${CMAKE_CURRENT_BINARY_DIR}/fork_snapshot.${mode}.json")
endforeach()

# A pool that cannot be made (an invalid CLPOOL_MAX_CACHED_GB): the driver serves, nothing is left behind.
add_executable(interpose_pool_refused ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_pool_refused.c)
target_link_libraries(interpose_pool_refused PRIVATE OpenCL::OpenCL clpool_warnings ${CMAKE_DL_LIBS})
add_dependencies(interpose_pool_refused clpool_interpose)
add_dependencies(interpose_semantics interpose_pool_refused)
add_test(NAME interpose_pool_refused.plain COMMAND interpose_pool_refused)
set_tests_properties(interpose_pool_refused.plain PROPERTIES ENVIRONMENT "CLPOOL_MAX_CACHED_GB=lots")
add_test(NAME interpose_pool_refused.preload COMMAND interpose_pool_refused)
set_tests_properties(interpose_pool_refused.preload PROPERTIES ENVIRONMENT
  "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib};CLPOOL_MAX_CACHED_GB=lots")
add_test(NAME interpose_pool_refused.layer COMMAND interpose_pool_refused)
set_tests_properties(interpose_pool_refused.layer PROPERTIES ENVIRONMENT
  "OPENCL_LAYERS=${_lib};CLPOOL_INTERPOSER=${_lib};CLPOOL_MAX_CACHED_GB=lots")

# Allocation churn, plain vs interposed (a measurement, not a test: run it by hand or from
# benchmarks/gpu/interposer.sh).
add_executable(interpose_bench ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_bench.c)
target_link_libraries(interpose_bench PRIVATE OpenCL::OpenCL clpool_warnings)
# Shared-virtual-memory churn, 4 KiB .. 64 MiB, plain vs interposed (also a measurement, from
# benchmarks/gpu/interposer.sh); the test runs it briefly and checks the three runs read back the same.
add_executable(interpose_svm_bench ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_svm_bench.c)
target_link_libraries(interpose_svm_bench PRIVATE OpenCL::OpenCL clpool_warnings ${CMAKE_DL_LIBS})
add_dependencies(interpose_svm_bench clpool_interpose)
add_dependencies(interpose_semantics interpose_svm_bench)
add_test(NAME interpose_svm_bench.checksums
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/svm_bench_check.sh $<TARGET_FILE:interpose_svm_bench> ${_lib} 40)
set_tests_properties(interpose_svm_bench.checksums PROPERTIES TIMEOUT 60)
# Slicing one long-lived buffer 100,000 times: seconds and peak RSS, plain vs interposed (also by hand).
add_executable(interpose_slice_bench ${CMAKE_CURRENT_SOURCE_DIR}/tests/interpose_slice_bench.c)
target_link_libraries(interpose_slice_bench PRIVATE OpenCL::OpenCL clpool_warnings)

# The reuse-ordering protocol's unit tests: its logic on fake queues and events. Not linked with
# OpenCL, so a call to the driver from reuse_order.cpp fails the build.
find_package(doctest REQUIRED)
add_executable(interposer_protocol_tests ${PROJECT_SOURCE_DIR}/tests/main.cpp
               ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_reuse_order.cpp ${CMAKE_CURRENT_SOURCE_DIR}/reuse_order.cpp)
target_include_directories(interposer_protocol_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                           $<TARGET_PROPERTY:OpenCL::OpenCL,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_definitions(interposer_protocol_tests PRIVATE CL_TARGET_OPENCL_VERSION=300)
target_link_libraries(interposer_protocol_tests PRIVATE doctest::doctest clpool_warnings)
target_compile_features(interposer_protocol_tests PRIVATE cxx_std_20)
# g++ 12 at -O3 reports a false -Wrestrict in std::string concatenation (GCC bug 105329), which
# CLPOOL_WERROR turns into a failed Release build of this test's string helpers.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(interposer_protocol_tests PRIVATE -Wno-restrict)
endif()
add_test(NAME interposer_protocol_tests COMMAND interposer_protocol_tests)
