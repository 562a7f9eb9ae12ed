# The API reference generated from the headers by Debian's doxygen (docs/Doxyfile): it must build
# with no warning (WARN_AS_ERROR). Every public name must also be in the hand-written docs/API.md
# (tools/lint/check_api_doc.py; ctest runs it too as lint.api_doc), every docs/results file is cited
# and every citation exists (tools/lint/check_results.py), and no comment, test or doc outside the
# changelog names an issue number (the why belongs in the text, the when in git history). Seconds.
set -euo pipefail
start=$(date +%s)
python3 tools/lint/check_api_doc.py
python3 tools/lint/check_results.py
if git grep -nIiE "issue ?#?[0-9]+" -- . ':!CHANGELOG.md'; then
  echo "the lines above name an issue number: say why instead (git history keeps when)" >&2
  exit 1
fi
mkdir -p build/doxygen
doxygen docs/Doxyfile
if [ -s build/doxygen/warnings.log ]; then
  cat build/doxygen/warnings.log >&2
  exit 1
fi
test -s build/doxygen/html/index.html
echo "doxygen: $(find build/doxygen/html -name '*.html' | wc -l) pages in $(( $(date +%s) - start )) s"
