# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer, then ThreadSanitizer (clang), PoCL as the device.
set -euo pipefail
jobs=$(nproc)
common=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DCLPOOL_BUILD_BENCHMARKS=OFF -DCLPOOL_BUILD_TOOLS=OFF -DCLPOOL_WERROR=ON
        -DCLPOOL_HEADER_CHECK=OFF -DCLPOOL_COMPILE_FAIL_TESTS=OFF)  # compile-only checks gain nothing under sanitizers
supp="$PWD/.ci/sanitizers"

cmake -S . -B build/asan "${common[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake --build build/asan -j "$jobs"
ASAN_OPTIONS="detect_leaks=1:suppressions=$supp/asan.supp" LSAN_OPTIONS="suppressions=$supp/lsan.supp" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  ctest --test-dir build/asan --output-on-failure -j "$jobs"

cmake -S . -B build/tsan "${common[@]}" -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"
cmake --build build/tsan -j "$jobs"
TSAN_OPTIONS="suppressions=$supp/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
  ctest --test-dir build/tsan --output-on-failure -j "$jobs"
