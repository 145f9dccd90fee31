#!/usr/bin/env bash
# Build the HTML documentation with Sphinx, warnings as errors.  Works from a fresh
# clone: it makes its own venv, installs the doc tools (requirements-docs.txt), and
# builds + installs fastpe there first (the API pages come from the compiled package).
#   bash tools/build_docs.sh                          # venv in .venv-docs (reused)
#   FASTPE_DOCS_VENV=/tmp/d bash tools/build_docs.sh  # another venv
# Output: docs/_build/html/index.html (or $FASTPE_DOCS_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
VENV=${FASTPE_DOCS_VENV:-.venv-docs}
OUT=${FASTPE_DOCS_OUT:-docs/_build/html}
PY=${PYTHON:-python3}
start=$SECONDS

echo "== docs: venv $VENV"
if [ ! -x "$VENV/bin/python" ]; then
    source tools/venv.sh
    new_venv "$PY" "$VENV"
fi
"$VENV/bin/python" -m pip install -q -r requirements-docs.txt

echo "== docs: build and install fastpe into the venv"
bash tools/install_tree.sh "$VENV/bin/python"
"$VENV/bin/python" -c "import fastpe, sphinx; print('fastpe', fastpe.__version__, '| Sphinx', sphinx.__version__)"

echo "== docs: sphinx-build -W (warnings are errors) -> $OUT"
rm -rf "$OUT" docs/_build/doctrees docs/_generated
# -W --keep-going: report every warning, then fail; -n is not used (numpydoc types
# such as "int, optional" are prose, not cross-references).
if "$VENV/bin/python" -m sphinx -b html -W --keep-going -q -d docs/_build/doctrees docs "$OUT"; then
    echo "== docs: OK, $OUT/index.html ($((SECONDS - start)) s)"
else
    echo "== docs: FAILED (see the warnings above; $((SECONDS - start)) s)" >&2
    exit 1
fi
