# clang-format 19 (bookworm main) over the repository's C and C++ files with the style in .clang-format:
# a file that is not formatted fails the step, with the lines it would change. Test data and docs are
# left out. To format the same files:
#   git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp' '*.cc' ':!:tests/data/**' ':!:docs/**' | xargs -0 clang-format-19 -i
# Seconds.
set -uo pipefail
start=$(date +%s)
clang-format-19 --version
git ls-files -z '*.c' '*.h' '*.cpp' '*.hpp' '*.cc' ':!:tests/data/**' ':!:docs/**' |
  xargs -0 -r -n 16 -P "$(nproc)" clang-format-19 --dry-run --Werror
rc=$?
echo "format: $(( $(date +%s) - start )) s"
exit $rc
