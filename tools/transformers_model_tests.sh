#!/usr/bin/env bash
# transformers' own model tests for llama, qwen2, mistral, gemma, phi3, gpt_neox and
# qwen2_vl (and the rope utils tests), run twice in one venv: as they are, then with
# every model sent through fastpe.torch.patch_model as it is built and each family's
# apply_rotary_pos_emb replaced by fastpe.torch's (tools/fastpe_transformers_plugin.py).
# Prints the counts and every test that passes unpatched and fails patched; exits 1
# if there is any.  The tests come from transformers' repository at the tag of the
# pinned version (requirements-frameworks.txt), fetched at run time (needs network).
#   bash tools/transformers_model_tests.sh            # all families
#   bash tools/transformers_model_tests.sh llama phi3 # some of them
#   PYTEST_ARGS="-x -k rope" bash tools/transformers_model_tests.sh llama
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WORK=${FASTPE_TF_WORK:-$(mktemp -d)}
FAMILIES=("$@")
[ ${#FAMILIES[@]} -gt 0 ] || FAMILIES=(llama qwen2 mistral gemma phi3 gpt_neox qwen2_vl)
VERSION=$(sed -n 's/^transformers==//p' requirements-frameworks.txt)

VENV="$WORK/venv"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -r requirements-frameworks.txt "setuptools>=77" wheel \
        "Cython>=3.1" "pytest>=7" pytest-timeout parameterized "ml_dtypes>=0.2" accelerate
    # (see tools/test_frameworks.sh: torchvision's PyPI wheels break transformers beside
    # the CPU torch)
    "$VENV/bin/python" -m pip uninstall -q -y torchvision
    rm -rf build src/fastpe/kernel.c
    "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall .
fi

SRC="$WORK/transformers"
if [ ! -d "$SRC/tests" ]; then
    git clone -q --depth 1 --branch "v$VERSION" --filter=blob:none --sparse \
        https://github.com/huggingface/transformers "$SRC"
    # tests/ is small next to the repository; its files at the top level are the mixins
    git -C "$SRC" sparse-checkout set --no-cone '/tests/*.py' '/tests/generation/' \
        '/tests/utils/' '/tests/fixtures/' '/conftest.py' '/pyproject.toml' \
        "${FAMILIES[@]/#//tests/models/}"
fi
TESTS=()
for f in "${FAMILIES[@]}"; do TESTS+=("tests/models/$f/test_modeling_$f.py"); done
TESTS+=("tests/utils/test_modeling_rope_utils.py")

run() {  # $1: patched (1) or not (0); $2: the junit file
    (cd "$SRC" && FASTPE_PATCH=$1 FASTPE_PATCH_LOG="$WORK/left-alone.tsv" \
        PYTHONPATH="$ROOT/tools" "$VENV/bin/python" -m pytest "${TESTS[@]}" \
        -p fastpe_transformers_plugin -q -p no:cacheprovider --timeout 600 \
        --junitxml "$2" ${PYTEST_ARGS:-} >"$2.log" 2>&1) || true
    tail -n 1 "$2.log"
}
rm -f "$WORK/left-alone.tsv"
echo "transformers $VERSION tests of: ${FAMILIES[*]} (in $WORK)"
echo "unpatched: $(run 0 "$WORK/unpatched.xml")"
echo "patched:   $(run 1 "$WORK/patched.xml")"
"$VENV/bin/python" - "$WORK" <<'EOF'
import collections
import sys
import xml.etree.ElementTree as ET

work = sys.argv[1]


def outcomes(path):
    out = {}
    for case in ET.parse(path).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = ("failed" if kinds & {"failure", "error"}
                     else "skipped" if "skipped" in kinds else "passed")
    return out


before, after = outcomes(f"{work}/unpatched.xml"), outcomes(f"{work}/patched.xml")
passed = [n for n, o in before.items() if o == "passed"]
broken = sorted(n for n in passed if after.get(n, "missing") != "passed")
print(f"passed unpatched: {len(passed)}; of those, not passed patched: {len(broken)}")
print("outcomes unpatched:", dict(collections.Counter(before.values())))
print("outcomes patched:  ", dict(collections.Counter(after.values())))
for n in broken:
    print("  ", after.get(n, "missing"), n)
try:
    with open(f"{work}/left-alone.tsv", encoding="utf-8") as f:
        left = collections.Counter(line.split("\t", 1)[1].strip() for line in f)
    print("rotary modules left alone (module: reason), times:")
    for what, times in left.most_common():
        print(f"  {times:6d}  {what}")
except FileNotFoundError:
    pass
sys.exit(1 if broken else 0)
EOF
