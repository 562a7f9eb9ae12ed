# A new user's first hour: clpool installed, then the README quick start and one program
# per guide (tests/first_hour/: an engine loop with transfers and release_after, a custom pool,
# shapes, devices), each its own CMake project that knows only find_package(clpool), built and run
# on the default OpenCL device (PoCL in CI).
set -euo pipefail
work=$PWD/build/first-hour
rm -rf "$work"
cmake -S . -B "$work/lib" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLPOOL_BUILD_TESTS=OFF -DCLPOOL_BUILD_BENCHMARKS=OFF \
  -DCLPOOL_BUILD_TOOLS=OFF >/dev/null
cmake --build "$work/lib" -j "$(nproc)" >/dev/null
cmake --install "$work/lib" --prefix "$work/prefix" >/dev/null
# The quick start exactly as README.md shows it, between its markers.
mkdir -p "$work/src/quickstart"
cp tests/first_hour/quickstart/CMakeLists.txt "$work/src/quickstart/"
sed -n '/<!-- quickstart:begin -->/,/<!-- quickstart:end -->/p' README.md | sed '1,2d;$d' | sed '$d' \
  >"$work/src/quickstart/main.cpp"
grep -q 'int main' "$work/src/quickstart/main.cpp" || { echo "README.md: no quick start found" >&2; exit 1; }
failed=()
for program in quickstart engine_loop custom_pool shapes devices svm; do
  src=tests/first_hour/$program
  [ "$program" = quickstart ] && src=$work/src/quickstart
  echo "--- $program"
  if cmake -S "$src" -B "$work/$program" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$work/$program" -j "$(nproc)" && "$work/$program/$program"; then
    echo "--- $program: ok"
  else
    echo "--- $program: FAILED"
    failed+=("$program")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "first hour: failed: ${failed[*]}" >&2
  exit 1
fi
