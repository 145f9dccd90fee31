"""The C API's signatures are written once, and everything else follows them.

lib/include/fastpe/fastpe.h holds the signatures (its FASTPE_API prototypes);
tools/gen_capi.py writes from them, in the order of the capsule's table, the
typedefs, struct and wrapper macros of the capsule's fastpe.h, kernel.pxd's
declarations, and the Cython parts of _capi.pxi and _pe_core.pxi; and the
shared library's exported symbols (lib/fastpe.map).  These tests
fail when a generated block is edited by hand or not regenerated, when the
table's version and the list disagree, and when the installed fastpe.h does not
stand alone.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import fastpe

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gen_capi.py"

pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="no source tree (tools/gen_capi.py)")


def _gen(root: pathlib.Path | None = None):
    """tools/gen_capi.py as a module, its files under root (default: the tree's)."""
    spec = importlib.util.spec_from_file_location("gen_capi_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclass looks itself up there)
    spec.loader.exec_module(mod)
    if root is not None:
        for name in ("NATIVE", "CAPSULE", "PXD", "CAPI", "CORE", "MAP"):
            path = getattr(mod, name)
            setattr(mod, name, root / path.relative_to(mod.ROOT))
        mod.ROOT = root
    return mod


def test_the_generated_blocks_are_what_the_signatures_give():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr


@pytest.fixture
def tree(tmp_path):
    """A copy of the files the script reads and writes."""
    gen = _gen()
    for name in ("NATIVE", "CAPSULE", "PXD", "CAPI", "CORE", "MAP"):
        path = getattr(gen, name)
        dest = tmp_path / path.relative_to(gen.ROOT)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    return tmp_path


@pytest.mark.parametrize(
    "where, old, new",
    [
        # a hand edit of a generated block
        ("src/fastpe/kernel.pxd", "cdef int fill_f32(float *out", "cdef int fill_f32(double *out"),
        ("src/fastpe/_capi.pxi", "_c_api_table.fill_f64 = fastpe_fill_f64\n", ""),
        ("src/fastpe/include/fastpe.h", "fastpe_fill_f32_fn fill_f32;", "fastpe_fill_f32_fn f32;"),
        ("src/fastpe/include/fastpe.h", "FASTPE_CALL_(add_f32,", "FASTPE_CALL_(add_f64,"),
        ("lib/fastpe.map", "    fastpe_fill_poll;\n", ""),
        # a signature changed in the library's header and not regenerated
        (
            "lib/include/fastpe/fastpe.h",
            "int64_t d_model, int64_t row_stride,\n",
            "int64_t d_model, int row_stride,\n",
        ),
    ],
)
def test_the_check_sees_a_drift(tree, capsys, where, old, new):
    path = tree / where
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    assert _gen(tree).main(["--check"]) == 1
    assert "run python tools/gen_capi.py" in capsys.readouterr().err


def test_writing_restores_the_blocks(tree):
    pxd = tree / "src" / "fastpe" / "kernel.pxd"
    good = pxd.read_text()
    pxd.write_text(good.replace("noexcept nogil", "nogil", 1))
    gen = _gen(tree)
    assert gen.main([]) == 0
    assert pxd.read_text() == good
    assert gen.main(["--check"]) == 0


def test_every_table_slot_but_the_python_ones_is_a_library_function():
    gen = _gen()
    native = gen.native_prototypes(gen.NATIVE.read_text())
    slots = gen.slots(native)
    names = [s.name for s in slots]
    assert len(names) == len(set(names))
    assert {s.name for s in slots if not s.library} == {"spec_new", "rope_new"}
    assert {"fastpe_" + s.name for s in slots if s.library} <= set(native)
    # the table's version is that of its last slot
    major, minor = (int(v) for v in gen.TABLE[-1][0].split("."))
    assert (major, minor) == fastpe.kernel.C_API_VERSION


def test_the_exported_symbols_are_the_headers_functions():
    """tools/test_clib.sh compares the shared library's exports with this list;
    lib/fastpe.map exports these names, and hides the rest."""
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--symbols"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    symbols = out.stdout.split()
    assert symbols == sorted(set(symbols)) and len(symbols) >= 55
    assert all(re.fullmatch(r"fastpe_[a-z0-9_]+", s) for s in symbols)
    text = re.sub(r"/\*.*?\*/", " ", (ROOT / "lib" / "fastpe.map").read_text(), flags=re.S)
    glob = re.search(r"global:(.*?)local:", text, re.S)
    assert glob is not None
    assert glob.group(1).split() == [s + ";" for s in symbols]


def test_the_installed_capsule_header_stands_alone():
    installed = pathlib.Path(fastpe.get_include()) / "fastpe.h"
    source = ROOT / "src" / "fastpe" / "include" / "fastpe.h"
    if installed.resolve() == source.resolve():
        pytest.skip("an editable install: fastpe.h is the source tree's")
    text = installed.read_text()
    native = (ROOT / "lib" / "include" / "fastpe" / "fastpe.h").read_text()
    assert '#include "../' not in text
    assert native in text  # the library's header, whole: its documentation comes along
