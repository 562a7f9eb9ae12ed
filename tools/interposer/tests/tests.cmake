# The interposer's tests: C programs linked only with -lOpenCL, run plain, under LD_PRELOAD
# and as an OpenCL layer. CLPOOL_INTERPOSER tells a program the interposer must be there.
enable_language(C)
set(_lib $<TARGET_FILE:clpool_interpose>)
foreach(prog interpose_semantics)
  add_executable(${prog} ${CMAKE_CURRENT_SOURCE_DIR}/tests/${prog}.c)
  target_link_libraries(${prog} PRIVATE OpenCL::OpenCL)
  target_compile_options(${prog} PRIVATE -Wall -Wextra)
  add_dependencies(${prog} clpool_interpose)
  add_test(NAME ${prog}.plain COMMAND ${prog})
  add_test(NAME ${prog}.preload COMMAND ${prog})
  set_tests_properties(${prog}.preload PROPERTIES ENVIRONMENT "LD_PRELOAD=${_lib};CLPOOL_INTERPOSER=${_lib}")
  add_test(NAME ${prog}.layer COMMAND ${prog})
  set_tests_properties(${prog}.layer PROPERTIES ENVIRONMENT "OPENCL_LAYERS=${_lib};CLPOOL_INTERPOSER=${_lib}")
endforeach()

# The exit report (CLPOOL_REPORT=1) and the trace (CLPOOL_TRACE), from both fronts.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
foreach(mode preload layer)
  add_test(NAME interpose_report_trace.${mode}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/report_and_trace.sh $<TARGET_FILE:interpose_semantics> ${_lib} ${mode})
endforeach()
