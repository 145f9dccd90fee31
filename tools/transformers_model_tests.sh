#!/usr/bin/env bash
# transformers' own model tests for llama, qwen2, mistral, gemma, phi3, gpt_neox and
# qwen2_vl (and the rope utils tests), run twice, family by family: as they are, then
# with every model sent through fastpe.torch.patch_model as it is built and each
# family's apply_rotary_pos_emb replaced by fastpe.torch's
# (tools/fastpe_transformers_plugin.py).  Prints a table of the counts (passed, failed,
# skipped; both ways) and every test that passes unpatched and not patched; exits 1 if
# there is any.
#   bash tools/transformers_model_tests.sh               # all families
#   bash tools/transformers_model_tests.sh llama phi3    # some of them
#   PYTEST_ARGS="-k rope" bash tools/transformers_model_tests.sh llama
# Settings (environment):
#   FASTPE_TF_SRC=DIR   a transformers checkout (or any folder holding its tests/ and
#                       conftest.py) to take the tests from; without it they are cloned
#                       at the tag of the pinned version (requirements-frameworks.txt),
#                       which needs network
#   FASTPE_TF_VENV=DIR  a virtual environment with torch, transformers, pytest,
#                       pytest-timeout, pytest-xdist, parameterized, httpx and datasets, used as it is (it
#                       must import this checkout's fastpe: installed, or through
#                       PYTHONPATH); without it one is made in the work folder and this
#                       checkout installed into it
#   FASTPE_TF_WORK=DIR  where the results go (default: a new temporary folder)
#   FASTPE_TF_TIMEOUT   seconds one test may take (default 300)
#   FASTPE_TF_REPORT_ONLY=1  print the table of the results already in FASTPE_TF_WORK
# The tests run offline (HF_HUB_OFFLINE=1 unless set), and slow tests stay skipped as in
# transformers' own CI without RUN_SLOW: a test that needs the Hub fails both ways.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
WORK=${FASTPE_TF_WORK:-$(mktemp -d)}
mkdir -p "$WORK"
FAMILIES=("$@")
[ ${#FAMILIES[@]} -gt 0 ] || FAMILIES=(llama qwen2 mistral gemma phi3 gpt_neox qwen2_vl rope_utils)
VERSION=$(sed -n 's/^transformers==//p' requirements-frameworks.txt)

# (FASTPE_TF_REPORT_ONLY: only the table, from the results already there)
if [ -z "${FASTPE_TF_REPORT_ONLY:-}" ]; then
    if [ -n "${FASTPE_TF_VENV:-}" ]; then
        VENV=$FASTPE_TF_VENV
        [ -x "$VENV/bin/python" ] || { echo "FASTPE_TF_VENV=$VENV has no bin/python" >&2; exit 2; }
    else
        VENV="$WORK/venv"
        if [ ! -x "$VENV/bin/python" ]; then
            "$PY" -m venv "$VENV"
            "$VENV/bin/python" -m pip install -q --upgrade pip
            "$VENV/bin/python" -m pip install -q -r requirements-frameworks.txt "setuptools>=77" wheel \
                "Cython>=3.1" "pytest>=7" pytest-timeout pytest-xdist parameterized "ml_dtypes>=0.2" \
                accelerate httpx datasets
            # (see tools/test_frameworks.sh: torchvision's PyPI wheels break transformers beside
            # the CPU torch)
            "$VENV/bin/python" -m pip uninstall -q -y torchvision
            rm -rf build src/fastpe/kernel.c
            "$VENV/bin/python" -m pip install -q --no-build-isolation --no-deps --force-reinstall .
        fi
    fi

    if [ -n "${FASTPE_TF_SRC:-}" ]; then
        SRC=$FASTPE_TF_SRC
    else
        SRC="$WORK/transformers"
        if [ ! -d "$SRC/tests" ]; then
            git clone -q --depth 1 --branch "v$VERSION" --filter=blob:none --sparse \
                https://github.com/huggingface/transformers "$SRC"
            # tests/ is small next to the repository; its files at the top level are the mixins
            git -C "$SRC" sparse-checkout set --no-cone '/tests/*.py' '/tests/generation/' \
                '/tests/utils/' '/tests/fixtures/' '/tests/pipelines/' '/conftest.py' \
                '/pyproject.toml' '/tests/models/*.py' \
                "${FAMILIES[@]/#//tests/models/}"
        fi
    fi
    [ -d "$SRC/tests" ] || { echo "no tests/ in $SRC" >&2; exit 2; }
    # the pipeline and configuration mixins read src/transformers of the checkout; a tests
    # tree without it is given a link to the installed package, the one under test
    if [ ! -e "$SRC/src/transformers" ]; then
        mkdir -p "$SRC/src"
        INSTALLED=$("$VENV/bin/python" -c \
            'import os, transformers; print(os.path.dirname(transformers.__file__))')
        ln -s "$INSTALLED" "$SRC/src/transformers"
    fi

    tests_of() {  # the test file of one family
        if [ "$1" = rope_utils ]; then
            echo tests/utils/test_modeling_rope_utils.py
        else
            echo "tests/models/$1/test_modeling_$1.py"
        fi
    }

    # PYTEST_ARGS is split as the shell splits words, quotes included (-k "not a and not b")
    eval "EXTRA=(${PYTEST_ARGS:-})"
    run() {  # $1: the family; $2: patched (1) or not (0); $3: the junit file
        (cd "$SRC" && FASTPE_PATCH=$2 FASTPE_PATCH_LOG="$WORK/patch-log.tsv" \
            HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}" \
            "$VENV/bin/python" -m pytest "$(tests_of "$1")" -p fastpe_transformers_plugin -q \
            -p no:cacheprovider --timeout "${FASTPE_TF_TIMEOUT:-300}" --junitxml "$3" \
            ${EXTRA[@]+"${EXTRA[@]}"} >"$3.log" 2>&1) || true
        tail -n 1 "$3.log"
    }
    rm -f "$WORK/patch-log.tsv"
    "$VENV/bin/python" -c "import fastpe, transformers, torch; print('fastpe', fastpe.__version__, \
    'from', fastpe.__file__, '; transformers', transformers.__version__, '; torch', torch.__version__)"
    echo "tests from $SRC, results in $WORK"
    for family in "${FAMILIES[@]}"; do
        echo "$family unpatched: $(run "$family" 0 "$WORK/$family.unpatched.xml")"
        echo "$family patched:   $(run "$family" 1 "$WORK/$family.patched.xml")"
    done
fi
"$PY" - "$WORK" "${FAMILIES[@]}" <<'EOF'
import collections
import os
import sys
import xml.etree.ElementTree as ET

work, families = sys.argv[1], sys.argv[2:]


def outcomes(path):
    out = {}
    if not os.path.exists(path):
        return out
    for case in ET.parse(path).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        out[name] = ("failed" if kinds & {"failure", "error"}
                     else "skipped" if "skipped" in kinds else "passed")
    return out


kinds = ("passed", "failed", "skipped")
print(f"{'family':<11} {'unpatched p/f/s':>17} {'patched p/f/s':>17}  passed unpatched, not patched")
broken = []
total = {"unpatched": collections.Counter(), "patched": collections.Counter()}
for family in families:
    before = outcomes(f"{work}/{family}.unpatched.xml")
    after = outcomes(f"{work}/{family}.patched.xml")
    lost = sorted(n for n, o in before.items() if o == "passed" and after.get(n, "missing") != "passed")
    broken += [(family, n, after.get(n, "missing")) for n in lost]
    counts = []
    for label, found in (("unpatched", before), ("patched", after)):
        c = collections.Counter(found.values())
        total[label].update(c)
        counts.append("/".join(str(c[k]) for k in kinds))
    print(f"{family:<11} {counts[0]:>17} {counts[1]:>17}  {len(lost)}")
counts = ["/".join(str(total[label][k]) for k in kinds) for label in ("unpatched", "patched")]
print(f"{'all':<11} {counts[0]:>17} {counts[1]:>17}  {len(broken)}")
for family, name, outcome in broken:
    print(f"  {outcome}: {name}")
try:
    with open(f"{work}/patch-log.tsv", encoding="utf-8") as f:
        seen = collections.Counter(tuple(line.rstrip("\n").split("\t")[1:]) for line in f)
    replaced = sum(times for (_, what), times in seen.items() if what == "replaced")
    print(f"rotary modules replaced as models were built: {replaced}; left alone, times:")
    for (name, what), times in seen.most_common():
        if what != "replaced":
            print(f"  {times:6d}  {name}: {what}")
except FileNotFoundError:
    print("no rotary module was replaced")
sys.exit(1 if broken else 0)
EOF
