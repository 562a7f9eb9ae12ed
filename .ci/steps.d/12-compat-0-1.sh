# A program written against clpool 0.1 compiles against this version with deprecation warnings at
# most (CHANGELOG.md, "Migrating from 0.1"). clpool installed, then tests/compat_0_1/ (programs
# written to 0.1's README and docs, with 0.1's header paths and type names) built against the
# package with every warning an error except deprecations, and run on the default OpenCL device.
# The build must show the deprecations (an alias that stopped warning would hide a rename from
# its users), and the C drop-in pair is built as C. Seconds.
set -euo pipefail
start=$(date +%s)
work=$PWD/build/compat-0-1
rm -rf "$work"
cmake -S . -B "$work/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF \
  -DCLPOOL_BUILD_TOOLS=OFF -DCLPOOL_BUILD_DROPIN_C=OFF >/dev/null
cmake --install "$work/lib" --prefix "$work/prefix" >/dev/null
flags="-Wall -Wextra -Werror -Wno-error=deprecated-declarations"
cmake -S tests/compat_0_1 -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" >/dev/null
if ! cmake --build "$work/build" -j "$(nproc)" >"$work/build.log" 2>&1; then
  cat "$work/build.log"
  echo "compat 0.1: a 0.1 program no longer compiles (CHANGELOG.md, Migrating from 0.1)" >&2
  exit 1
fi
# Every warning is a deprecation, and each 0.1 name the programs use says what replaces it.
others=$(grep -E 'warning:' "$work/build.log" | grep -vc 'Wdeprecated-declarations' || true)
missing=()
for name in AllocStatus MemoryKind BackendKind DeviceType DeviceFacts DeviceScope WaitOptions WaitStatus \
  InterruptHandlerOptions ShutdownReport ElementType Order; do
  grep -q "use clpool::$name\b" "$work/build.log" || missing+=("$name")
done
echo "compat 0.1: $(grep -c 'Wdeprecated-declarations' "$work/build.log") deprecation warnings, $others other warnings"
if [ "$others" -ne 0 ] || [ ${#missing[@]} -gt 0 ]; then
  grep -E 'warning:' "$work/build.log" | grep -v 'Wdeprecated-declarations' || true
  [ ${#missing[@]} -eq 0 ] || echo "compat 0.1: no deprecation warning names ${missing[*]}" >&2
  exit 1
fi
failed=()
for program in quickstart custom_pool user_backend shapes_devices_lifecycle transfers every_header dropin_c; do
  "$work/build/$program" >"$work/$program.out" 2>&1 || failed+=("$program")
done
echo "compat 0.1: $(( $(date +%s) - start )) s"
if [ ${#failed[@]} -gt 0 ]; then
  for program in "${failed[@]}"; do echo "--- $program"; cat "$work/$program.out"; done
  echo "compat 0.1: failed: ${failed[*]}" >&2
  exit 1
fi
