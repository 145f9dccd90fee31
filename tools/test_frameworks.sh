#!/usr/bin/env bash
# fastpe against the frameworks' own code (torch, transformers, diffusers, timm,
# rotary-embedding-torch),
# their float16/bfloat16 tensors (with ml_dtypes) and the plots (matplotlib), in a
# venv of their own: the README's test command runs without them, where those tests skip.  Fails if any of these tests still skips for
# a package this script installs.
#   bash tools/test_frameworks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=$(mktemp -d)/venv
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
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
"$VENV/bin/python" -m pytest tests/test_frameworks.py tests/test_out_interop.py tests/test_plot.py tests/test_rope.py \
    tests/test_rope_axes.py \
    tests/test_half.py tests/test_capi_rope.py tests/test_torch.py tests/test_frameworks_vision.py \
    tests/test_frameworks_rotary.py tests/test_rope_heads.py \
    tests/test_frameworks_vision2.py tests/test_torch_conformance.py \
    "tests/test_cli.py::test_bench_chart_into_missing_directory_fails_before_benchmarking" \
    -q -p no:cacheprovider -rs | tee "$log"
if grep -E "^SKIPPED.*(No module named|could not import|not importable|fastpe.torch)" "$log"; then
    echo "tools/test_frameworks.sh: the tests above skipped for a package this script installs" >&2
    exit 1
fi
rm -rf "$(dirname "$VENV")" "$log"
