#!/usr/bin/env bash
# fastpe against the frameworks' own code (torch, transformers, diffusers, timm,
# rotary-embedding-torch), their float16/bfloat16 tensors (with ml_dtypes) and the plots
# (matplotlib), in a venv of their own: the README's test command runs without them,
# where those tests skip.  Only the tests marked `frameworks` run here (FRAMEWORK_TESTS in
# tests/conftest.py; a test that skips for want of a framework without that mark fails
# the README's test command), since the others already ran there.  Fails if any of these
# tests still skips for a package this script installs.
#   bash tools/test_frameworks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=$(mktemp -d)/venv
source tools/venv.sh
new_venv "$PY" "$VENV"
"$VENV/bin/python" -m pip install -q -r requirements-frameworks.txt "setuptools>=77" wheel \
    "Cython>=3.1" "pytest>=7" "hypothesis>=6" "mpmath>=1.3" "threadpoolctl>=3" "ml_dtypes>=0.2"
# timm requires torchvision, whose PyPI wheels are built for the CUDA torch and break
# `import transformers` beside the CPU one; the tests load timm's module without it.
"$VENV/bin/python" -m pip uninstall -q -y torchvision
bash tools/install_tree.sh "$VENV/bin/python"
"$VENV/bin/python" -c "from importlib.metadata import version as v; print(' | '.join( \
f'{p} {v(p)}' for p in ('numpy', 'torch', 'transformers', 'diffusers', 'timm', 'rotary-embedding-torch',
    'matplotlib')))"
log=$(mktemp)
# (only the files that hold such tests are collected: a third of the suite's collection)
files=$("$VENV/bin/python" -c "import sys; sys.path.insert(0, 'tests'); import conftest
print(' '.join(sorted({'tests/' + t.split('::')[0] for t in conftest.FRAMEWORK_TESTS})))")
# shellcheck disable=SC2086
"$VENV/bin/python" -m pytest -m frameworks $files -q -p no:cacheprovider -rs | tee "$log"
installed='torch|transformers|diffusers|timm|rotary_embedding_torch|matplotlib|ml_dtypes'
if grep -E "^SKIPPED.*((No module named|could not import|not importable).*\b($installed)\b|\b($installed)\b[a-z_.]* is not importable)" "$log"; then
    echo "tools/test_frameworks.sh: the tests above skipped for a package this script installs" >&2
    exit 1
fi
rm -rf "$(dirname "$VENV")" "$log"
