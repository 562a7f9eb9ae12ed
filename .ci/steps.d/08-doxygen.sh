# The API reference generated from the headers by Debian's doxygen (docs/Doxyfile): it must build
# with no warning (WARN_AS_ERROR). Every public name must also be in the hand-written docs/API.md
# (tools/lint/check_api_doc.py; ctest runs it too as lint.api_doc). Seconds.
set -euo pipefail
start=$(date +%s)
python3 tools/lint/check_api_doc.py
mkdir -p build/doxygen
doxygen docs/Doxyfile
if [ -s build/doxygen/warnings.log ]; then
  cat build/doxygen/warnings.log >&2
  exit 1
fi
test -s build/doxygen/html/index.html
echo "doxygen: $(find build/doxygen/html -name '*.html' | wc -l) pages in $(( $(date +%s) - start )) s"
