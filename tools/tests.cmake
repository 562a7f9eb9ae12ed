# End-to-end tests: each tool runs on the test OpenCL device (PoCL in CI) with tiny sizes, and its
# exit code, standard output/error and written files are checked by tests/run_tool.cmake.
set(CLPOOL_TOOL_RUNNER ${CMAKE_CURRENT_SOURCE_DIR}/tests/run_tool.cmake)
set(CLPOOL_TOOL_OUT ${CMAKE_CURRENT_BINARY_DIR}/test-output)
set(CLPOOL_TRACES ${PROJECT_SOURCE_DIR}/tests/data/traces)
file(MAKE_DIRECTORY ${CLPOOL_TOOL_OUT})

# clpool_tool_test(NAME [RC code] [ENV VAR=value] [STDERR_NOT re] COMMAND prog args...
#                  [STDOUT re...] [STDERR re...] [FILES path re path re...])
function(clpool_tool_test name)
  cmake_parse_arguments(T "" "RC;ENV;STDERR_NOT" "COMMAND;STDOUT;STDERR;FILES" ${ARGN})
  set(defs)
  if(DEFINED T_RC)
    list(APPEND defs -DEXPECT_RC=${T_RC})
  endif()
  if(DEFINED T_STDERR_NOT)
    list(APPEND defs "-DSTDERR_NOT_RE=${T_STDERR_NOT}")
  endif()
  foreach(kind STDOUT STDERR)
    set(i 0)
    foreach(re IN LISTS T_${kind})
      list(APPEND defs "-D${kind}_RE_${i}=${re}")
      math(EXPR i "${i} + 1")
    endforeach()
  endforeach()
  set(i 0)
  set(is_path TRUE)
  foreach(item IN LISTS T_FILES)
    if(is_path)
      list(APPEND defs "-DFILE_${i}=${item}")
      set(is_path FALSE)
    else()
      list(APPEND defs "-DFILE_RE_${i}=${item}")
      math(EXPR i "${i} + 1")
      set(is_path TRUE)
    endif()
  endforeach()
  add_test(NAME tools.${name} COMMAND ${CMAKE_COMMAND} ${defs} -P ${CLPOOL_TOOL_RUNNER} -- ${T_COMMAND})
  set_tests_properties(tools.${name} PROPERTIES TIMEOUT 120 LABELS tools)
  if(DEFINED T_ENV)
    set_tests_properties(tools.${name} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()

set(info $<TARGET_FILE:clpool-info>)
set(replay $<TARGET_FILE:clpool-replay>)
set(o ${CLPOOL_TOOL_OUT})

# ---- clpool-viz (python3): on snapshot_demo's snapshot and on bad input; .ci/steps.d/65-viz-browser.sh
# opens the report in headless Chromium.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_executable(snapshot_demo viz/snapshot_demo.cpp)
target_link_libraries(snapshot_demo PRIVATE clpool::clpool clpool_warnings)
set_target_properties(snapshot_demo PROPERTIES ENABLE_EXPORTS ON)  # call sites named by dladdr
add_test(NAME tools.viz COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tests/tools/test_viz.py
  $<TARGET_FILE:snapshot_demo> ${CMAKE_CURRENT_SOURCE_DIR}/viz/clpool-viz ${o})
set_tests_properties(tools.viz PROPERTIES TIMEOUT 120 LABELS tools)
# The reports in headless Chromium, DOM counted against the snapshots (skipped without chromium).
add_test(NAME tools.viz_browser COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tests/tools/test_viz_browser.py
  $<TARGET_FILE:snapshot_demo> ${CMAKE_CURRENT_SOURCE_DIR}/viz/clpool-viz ${o})
set_tests_properties(tools.viz_browser PROPERTIES TIMEOUT 300 LABELS tools SKIP_RETURN_CODE 77)

# ---- clpool-info
clpool_tool_test(info.help COMMAND ${info} --help STDOUT "Usage" "--device" "Exit codes")
clpool_tool_test(info.unknown_option RC 2 COMMAND ${info} --bogus STDERR "--bogus" "clpool-info --help")
clpool_tool_test(info.bad_size RC 2 COMMAND ${info} --size 12q STDERR "'12q' is not a byte size")
clpool_tool_test(info.zero_reps RC 2 COMMAND ${info} --reps 0 STDERR "--reps")
clpool_tool_test(info.bad_device RC 2 COMMAND ${info} --device banana
  STDERR "--device='banana' matches no device" "Devices:" "host \\(the host backend")
clpool_tool_test(info.bad_env_device RC 2 ENV CLPOOL_DEVICE=7:7 COMMAND ${info} --list
  STDERR "CLPOOL_DEVICE='7:7' names no device")
# Counts are decimal: CLI11 alone reads "010" as octal 8 and "0x10" as 16.
clpool_tool_test(info.decimal_reps COMMAND ${info} --device host --size 4KiB --reps 010 STDOUT "median of 10\\)")
clpool_tool_test(info.hex_reps RC 2 COMMAND ${info} --reps 0x10 STDERR "'0x10' is not a decimal count")
clpool_tool_test(info.host COMMAND ${info} --device host --size 256KiB --reps 3
  STDOUT "chosen: host backend" "BufferPool hit" "recommended: clpool::host::BufferPool"
  "BufferPool: hits=[1-9]")
clpool_tool_test(info.env_host ENV CLPOOL_DEVICE=host COMMAND ${info} --list STDOUT "chosen: host backend")
# "host" in any case or spacing is the host backend as asked, not one chosen for want of a device.
clpool_tool_test(info.host_any_case COMMAND ${info} --device " HOST" --list
  STDOUT "chosen: host backend \\(--device ' HOST'\\)\n")
# Set but blank: the library's config_error, as for every clpool program (a blank is not "auto").
clpool_tool_test(info.blank_env_device RC 2 ENV CLPOOL_DEVICE= COMMAND ${info} --list
  STDERR "CLPOOL_DEVICE='' is empty")
# A directory is not a trace: the error says so, not "empty file" (which would send the user to edit it).
clpool_tool_test(replay.directory RC 2 COMMAND ${replay} ${CMAKE_CURRENT_SOURCE_DIR}/replay --no-search --no-buckets
  STDERR "cannot read trace '.*replay': Is a directory" STDERR_NOT "empty file")
if(CLPOOL_WITH_OPENCL)
  # No platform at run time (the ICD loader pointed at an empty folder): the host backend serves.
  file(MAKE_DIRECTORY ${o}/empty-icd)
  clpool_tool_test(info.no_platform ENV OCL_ICD_VENDORS=${o}/empty-icd COMMAND ${info} --size 64KiB --reps 2
    STDOUT "OpenCL: no platform found" "chosen: host backend" "recommended: clpool::host::BufferPool")
  clpool_tool_test(bandwidth.no_platform RC 2 ENV OCL_ICD_VENDORS=${o}/empty-icd COMMAND $<TARGET_FILE:clpool-bandwidth>
    STDERR "needs an OpenCL device" "pocl-opencl-icd")
  clpool_tool_test(replay.no_platform ENV OCL_ICD_VENDORS=${o}/empty-icd COMMAND ${replay}
    ${CLPOOL_TRACES}/small.trace --device auto --no-buckets STDOUT "backend: host backend" "\nBufferPool +33\\.3% +6 +3 ")
  # An OpenCL platform must exist (CI has PoCL): the listing and the measurement run on it.
  clpool_tool_test(info.list COMMAND ${info} --list --json ${o}/info-list.json
    STDOUT "OpenCL devices:" "chosen: 0:0 "
    FILES ${o}/info-list.json "\"max_alloc_bytes\": [1-9]")
  clpool_tool_test(info.measure COMMAND ${info} --device 0:0 --size 1MiB --reps 3 --json ${o}/info.json
    STDOUT "raw: clCreateBuffer" "BufferPool hit \\+ write all" "pinned write \\(host -> device\\) +[0-9]"
    "recommended: " "PinnedBufferPool: hits=[1-9]"
    "fast and frugal: clpool::OffsetArenaPool" "this device has coarse-grained SVM, so clpool::SVMArenaPool"
    FILES ${o}/info.json "\"pinned_write_gbps\": [0-9]" ${o}/info.json "\"fast_and_frugal\"")
  clpool_tool_test(info.too_big RC 2 COMMAND ${info} --device 0:0 --size 1TiB
    STDERR "above the device's maximum allocation")
  # A platform with two devices (PoCL's two CPU devices), which a program may put in one context:
  # the listing says one context per device is needed for transfer scaling, with NVIDIA's numbers.
  # With one device it says nothing of the kind.
  clpool_tool_test(info.several_devices ENV "POCL_DEVICES=pthread pthread" COMMAND ${info} --list
    --json ${o}/info-several.json
    STDOUT "several devices on platform 0 \\(Portable Computing Language\\): one context over its 2 devices can be made"
    "a blocking call or clFinish on one queue" "one context, blocking calls \\(clFinish\\): 55\\.1 -> 53\\.2 GB/s \\(0\\.97x one GPU\\)"
    "one context, waited for by events: 54\\.6 -> 106\\.0 GB/s \\(1\\.94x one GPU\\)"
    "one context per device: 54\\.9 -> 100\\.3 GB/s \\(1\\.83x one GPU\\)" "docs/DEVICES\\.md"
    FILES ${o}/info-several.json "\"one_context_spans\": 2")
  clpool_tool_test(info.one_device ENV POCL_DEVICES=pthread COMMAND ${info} --list --json ${o}/info-one.json
    FILES ${o}/info-one.json "\"several_devices\": \\[\\]")
else()
  clpool_tool_test(info.no_opencl COMMAND ${info} --list STDOUT "not built in" "chosen: host backend")
endif()

# ---- clpool-bandwidth
if(TARGET clpool-bandwidth)
  set(bw $<TARGET_FILE:clpool-bandwidth>)
  clpool_tool_test(bandwidth.help COMMAND ${bw} --help STDOUT "pinned-write" "staged-write" "map-read" "--svg")
  clpool_tool_test(bandwidth.sweep COMMAND ${bw} --min 4KiB --max 64KiB --reps 2 --warmup 0
    --csv ${o}/bw.csv --json ${o}/bw.json --svg ${o}/bw.svg
    STDOUT "pageable-write +pageable-read +pinned-write" "\n64 KiB +[0-9]"
    STDERR_NOT "\\[#"  # no progress bar when stderr is not a terminal
    FILES ${o}/bw.csv "size_bytes,mode,gbps,median_seconds\n4096,pageable-write,[0-9]"
          ${o}/bw.csv "65536,map-read,[0-9]"
          ${o}/bw.json "\"mode\": \"pinned-read\""
          ${o}/bw.svg "<svg.*<polyline.*pinned-write.*</svg>")
  clpool_tool_test(bandwidth.modes_csv_stdout COMMAND ${bw} --modes pinned-write,map-read --min 4KiB --max 8KiB
    --factor 2 --reps 1 -q --csv -
    STDOUT "^size_bytes,mode,gbps,median_seconds\n4096,pinned-write,[0-9.]+,[0-9.e-]+\n4096,map-read,.*8192,map-read,")
  clpool_tool_test(bandwidth.bad_mode RC 2 COMMAND ${bw} --modes warp STDERR "unknown mode 'warp'; modes: pageable-write")
  # Counts are decimal: CLI11 alone reads "010" as octal 8 and "0x10" as 16.
  clpool_tool_test(bandwidth.decimal_counts COMMAND ${bw} --modes pinned-write --min 4KiB --max 4KiB
    --reps 010 --warmup 010 STDOUT "median of 10 after 10 warm-up")
  clpool_tool_test(bandwidth.hex_reps RC 2 COMMAND ${bw} --reps 0x10 STDERR "'0x10' is not a decimal count")
  # Decimal numbers too: CLI11 alone reads "0x2" as 2 and lets "nan" through its range check.
  clpool_tool_test(bandwidth.decimal_factor COMMAND ${bw} --modes pinned-write --min 4KiB --max 6KiB
    --factor 15e-1 --reps 1 -q --csv - STDOUT "\n4096,pinned-write,[^\n]*\n6144,pinned-write,")
  clpool_tool_test(bandwidth.hex_factor RC 2 COMMAND ${bw} --factor 0x2
    STDERR "--factor: '0x2' is not a decimal number")
  clpool_tool_test(bandwidth.nan_factor RC 2 COMMAND ${bw} --factor nan
    STDERR "--factor: 'nan' is not a decimal number")
  # A mode is measured once: a repeat would be a second column of the same name.
  clpool_tool_test(bandwidth.duplicate_mode RC 2 COMMAND ${bw} --modes pinned-write,map-read,pinned-write
    STDERR "mode 'pinned-write' is given twice in --modes")
  clpool_tool_test(bandwidth.min_above_max RC 2 COMMAND ${bw} --min 1MiB --max 4KiB STDERR "swap them")
  clpool_tool_test(bandwidth.bad_factor RC 2 COMMAND ${bw} --factor 1 STDERR "--factor")
  clpool_tool_test(bandwidth.host RC 2 COMMAND ${bw} --device host STDERR "needs an OpenCL device")
  clpool_tool_test(bandwidth.unwritable RC 1 COMMAND ${bw} --min 4KiB --max 4KiB --reps 1 -q
    --csv ${o}/no-such-dir/bw.csv STDERR "cannot write '.*no-such-dir/bw.csv'")
endif()

# ---- clpool-replay
clpool_tool_test(replay.help COMMAND ${replay} --help STDOUT "--config" "buckets=pow2" "Exit codes")
clpool_tool_test(replay.no_trace RC 2 COMMAND ${replay} STDERR "trace is required" "clpool-replay --help")
clpool_tool_test(replay.missing_file RC 2 COMMAND ${replay} ${o}/absent.trace STDERR "cannot read trace")
# small.trace, worked by hand: 9 allocs, one USE_HOST_PTR pass-through; pow2 pools hit 3 times
# (4000 B into the freed 4 KiB, 1000000 B into the freed 1 MiB, 4096 B again), fixed buckets also
# serve 256 B from the freed 300 B's 1 KiB bucket; the tight cap evicts both 1 MiB buffers.
clpool_tool_test(replay.small COMMAND ${replay} ${CLPOOL_TRACES}/small.trace
  --config name=tight,buckets=quarter,cap=64KiB,per-bucket=1 --json ${o}/replay.json --svg ${o}/replay.svg
  STDOUT "9 allocs, 7 frees\\) over 4 \\(context, flags\\) pools; 2 buffers"
  "\nno pool +0\\.0% +9 +0 "
  "\nBufferPool +33\\.3% +6 +3 "
  "\nPersistentBufferPool +44\\.4% +5 +4 "
  "\ntight +22\\.2% +7 +2 +[0-9.]+ [KM]iB +[0-9.]+x +[0-9.]+ [KM]iB +[0-9.]+ [KM]?i?B +2 +0 "
  "held / live +min capacity"
  "per bucket, tight:\n.*\n  1 MiB +0 +2 +0\\.0% +2 +0"
  FILES ${o}/replay.json "\"driver_allocations_avoided\": 3"
        ${o}/replay.svg "<svg.*no pool.*PersistentBufferPool.*tight.*</svg>")
clpool_tool_test(replay.json_stdout COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --json - --no-buckets
  STDOUT "^{\n  \"backend\": \"host backend" "\"name\": \"BufferPool\"" STDERR "\nBufferPool +33\\.3% +6 +3 ")
clpool_tool_test(replay.sim_matches_host COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --device sim --no-buckets
  STDOUT "simulation" "\nBufferPool +33\\.3% +6 +3 ")
clpool_tool_test(replay.training_loop COMMAND ${replay} ${CLPOOL_TRACES}/training_loop.trace --x time
  --svg ${o}/loop.svg STDOUT "206 allocs" "\nBufferPool +9[0-9]\\.[0-9]%" FILES ${o}/loop.svg "time since start")
if(CLPOOL_WITH_OPENCL)
  clpool_tool_test(replay.opencl COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --device 0:0 --no-buckets
    STDOUT "backend: OpenCL " "\nBufferPool +33\\.3% +6 +3 ")
  # --timed on the device: every pool's passes, counts that must hold whatever the timing, and the
  # GPU script's summary over its JSON beside a PyTorch result made to measure.
  add_test(NAME tools.replay.timed COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tests/tools/test_replay_timed.py
    ${replay} ${CLPOOL_TRACES}/training_loop.trace ${PROJECT_SOURCE_DIR}/benchmarks/gpu/replay_timed_summary.py
    ${o}/replay-timed)
  set_tests_properties(tools.replay.timed PROPERTIES TIMEOUT 120 LABELS tools)
endif()
clpool_tool_test(replay.bad_config RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --config buckets=zig
  STDERR "buckets='zig'; expected pow2, fixed, half, quarter, eighth, sixteenth or arena")
# small.trace's live peak is 1.07 MiB; BufferPool needs exactly 1118720 B (worked in tests/tools/test_replay.cpp).
clpool_tool_test(replay.min_capacity COMMAND ${replay} ${CLPOOL_TRACES}/small.trace -d sim --no-buckets
  --resolution 1 --json ${o}/replay-capacity.json
  STDOUT "\nno pool +0\\.0% +9 +0 +1\\.07 MiB +1\\.00x +1\\.07 MiB "
  FILES ${o}/replay-capacity.json "\"min_capacity_bytes\": 1118720,\n *\"misses\": 5,\n *\"name\": \"BufferPool\"")
clpool_tool_test(replay.no_search COMMAND ${replay} ${CLPOOL_TRACES}/small.trace -d sim --no-buckets --no-search
  STDOUT "held / live +peak waste")
clpool_tool_test(replay.suggest COMMAND ${replay} ${CLPOOL_TRACES}/training_loop.trace -d sim --no-buckets
  --suggest --warmup 10% --min-hit-rate 90
  STDOUT "after warm-up" "suggest: 123 configurations" "suggested: -c buckets="
  "\nusing TracedPool = clpool::Pool<clpool::[A-Za-z<>0-9]+, clpool::DeviceLocal, clpool::(Capped|Unlimited), clpool::SingleMutex, clpool::(OpenCLBackend|SubAllocated<clpool::OpenCL(Offset)?Backend>)>;\n// TracedPool pool\\(")
# ArenaPool is an alias row now; the arena's keys are checked.
clpool_tool_test(replay.arena COMMAND ${replay} ${CLPOOL_TRACES}/training_loop.trace -d sim --no-buckets
  -c name=wide,buckets=arena,segment=8MiB,large-segment=64MiB,max-free=0.5
  STDOUT "\nArenaPool +[0-9.]+% " "\nwide +[0-9.]+% " "ArenaPool: [0-9]+ segments allocated, [0-9]+ \\(")
clpool_tool_test(replay.arena_key_without_arena RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace -c segment=4MiB
  STDERR "segment= applies to buckets=arena only")
clpool_tool_test(replay.suggest_unmet COMMAND ${replay} ${CLPOOL_TRACES}/small.trace -d sim --no-buckets --suggest
  STDOUT "none meets it; lower --min-hit-rate or raise --warmup")
clpool_tool_test(replay.bad_resolution RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --resolution 0
  STDERR "--resolution='0'; expected a byte size of at least 1")
clpool_tool_test(replay.bad_warmup RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --warmup 120%
  STDERR "--warmup='120%'; expected a count of allocations")
clpool_tool_test(replay.bad_min_hit_rate RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --suggest --min-hit-rate 101
  STDERR "--min-hit-rate")
clpool_tool_test(replay.hex_min_hit_rate RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --suggest
  --min-hit-rate 0x10 STDERR "--min-hit-rate: '0x10' is not a decimal number")
clpool_tool_test(replay.hex_max_free RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace -c buckets=arena,max-free=0x0.2
  STDERR "max-free='0x0.2'; expected a fraction")
clpool_tool_test(replay.bad_cap RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --config cap=lots
  STDERR "cap='lots'")
clpool_tool_test(replay.duplicate_names RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace
  --config name=a --config name=a STDERR "two configurations are named 'a'")
clpool_tool_test(replay.bad_device RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/small.trace --device 9:9
  STDERR "--device='9:9' names no device")

# Every malformed trace: exit 2, the line number, and what was expected.
foreach(case
    "bad_header|line 1: not a clpool trace; expected the header 'clpool-trace 1'"
    "bad_version|line 1: unsupported trace version"
    "unknown_op|line 3: unknown op 'realloc'; expected alloc or free"
    "field_count|line 2: alloc has 5 fields; expected 6"
    "non_numeric|line 3: bad size '12x'; expected a decimal byte count"
    "unknown_free|line 3: free of id 2, which is not live"
    "live_alloc|line 3: alloc of id 1, which is still live \\(allocated on line 2\\)"
    "time_backwards|line 3: time 4 is before 5 on line 2; expected times that never decrease"
    "live_overflow|line 3: size 9223372036854775808 with 9223372036854775808 bytes live takes the live bytes past 18446744073709551615")
  string(FIND "${case}" "|" bar)
  string(SUBSTRING "${case}" 0 ${bar} file)
  math(EXPR from "${bar} + 1")
  string(SUBSTRING "${case}" ${from} -1 message)
  clpool_tool_test(replay.malformed.${file} RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/malformed/${file}.trace
    STDERR "${message}" "docs/TRACE_FORMAT.md")
endforeach()

# Well-formed, but a pool's cached bytes and a pass-through buffer hold more than 64 bits count.
clpool_tool_test(replay.held_overflow RC 2 COMMAND ${replay} ${CLPOOL_TRACES}/malformed/held_overflow.trace -d sim
  --no-buckets STDERR "line 8: pass-through \\(CL_MEM_USE_HOST_PTR\\) size 4611686018427387904 takes the bytes BufferPool holds")

# Well-formed, but the driver refuses line 6's flags (read-only and write-only): exit 1, naming the line.
if(CLPOOL_WITH_OPENCL)
  clpool_tool_test(replay.driver_error_line RC 1 COMMAND ${replay} ${CLPOOL_TRACES}/malformed/refused_flags.trace
    --device 0:0 --no-buckets --no-search
    STDERR "trace '[^']*refused_flags.trace' line 6: BufferPool: alloc of id 2 \\(4096 bytes, flags 0x6\\): clpool: "
    "failed with driver code -30" "--device host to rule out the driver")
endif()

# Every shipped trace (hand-written, synthetic, and those recorded by the interposer) replays cleanly.
file(GLOB CLPOOL_SHIPPED_TRACES CONFIGURE_DEPENDS ${CLPOOL_TRACES}/*.trace)
foreach(trace IN LISTS CLPOOL_SHIPPED_TRACES)
  get_filename_component(stem ${trace} NAME_WE)
  clpool_tool_test(replay.shipped.${stem} COMMAND ${replay} ${trace} --device sim --no-buckets
    STDOUT "\nBufferPool +[0-9.]+%" "\nPersistentBufferPool +[0-9.]+%")
endforeach()

# The committed GPT-style traces are what benchmarks/traces/gpt_trace.py writes, and replay cleanly.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
set(gpt ${PROJECT_SOURCE_DIR}/benchmarks/traces)
foreach(kind training inference)
  add_test(NAME tools.gpt_trace.${kind} COMMAND Python3::Interpreter ${gpt}/gpt_trace.py ${kind}
           --check ${gpt}/gpt_${kind}.trace.gz)
  add_test(NAME tools.gpt_trace.${kind}.write COMMAND Python3::Interpreter ${gpt}/gpt_trace.py ${kind}
           -o ${o}/gpt_${kind}.trace)
  set_tests_properties(tools.gpt_trace.${kind} tools.gpt_trace.${kind}.write PROPERTIES LABELS tools)
  set_tests_properties(tools.gpt_trace.${kind}.write PROPERTIES FIXTURES_SETUP gpt_${kind})
  clpool_tool_test(replay.gpt_${kind} COMMAND ${replay} ${o}/gpt_${kind}.trace -d sim --no-buckets --no-search
    STDOUT "\nBufferPool +[0-9.]+% " "held / live")
  set_tests_properties(tools.replay.gpt_${kind} PROPERTIES FIXTURES_REQUIRED gpt_${kind})
endforeach()
# And those pattern_trace.py writes (a KV cache grown by re-allocation, bench_memory's two churns).
foreach(kind kv_cache loguniform tensors)
  set(file ${kind})
  if(NOT kind STREQUAL "kv_cache")
    set(file churn_${kind})
  endif()
  add_test(NAME tools.pattern_trace.${kind} COMMAND Python3::Interpreter ${gpt}/pattern_trace.py ${kind}
           --check ${gpt}/${file}.trace.gz)
  set_tests_properties(tools.pattern_trace.${kind} PROPERTIES LABELS tools)
endforeach()
