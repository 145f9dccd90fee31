"""The C API (fastpe.h + capsule), exercised by a C extension built at test time.

tests/ext/fastpe_capi_probe.c is compiled against the *installed* package
(fastpe.get_include()) and calls the kernel only through import_fastpe() and
fastpe_fill_f32/f64.  Every table it fills is compared bitwise with
fastpe.sinusoidal (the kernel is deterministic for any thread count).
"""

import datetime
import os
import re
import shutil
import sys

import numpy as np
import pytest
from extbuild import EXT_DIR, build, load, no_compiler_reason, quick_cflags

import fastpe
import fastpe.kernel

CODES = fastpe.kernel._C_CONSTANTS
LAYOUT = {"interleaved": CODES["FASTPE_LAYOUT_INTERLEAVED"], "split": CODES["FASTPE_LAYOUT_SPLIT"]}
DTYPE = {"f": np.float32, "d": np.float64}
INT64_MAX = 2**63 - 1
SENTINEL = 12345.0


def test_get_include_holds_the_header():
    inc = fastpe.get_include()
    assert os.path.isabs(inc)
    assert os.path.isfile(os.path.join(inc, "fastpe.h"))
    # the installed package's directory, not a source tree somewhere else
    assert os.path.dirname(inc) == os.path.dirname(os.path.abspath(fastpe.__file__))


def test_kernel_layout_codes_agree_with_the_python_layer():
    from fastpe._validate import _LAYOUT_CODES

    assert _LAYOUT_CODES == LAYOUT


def _tampered_header(dest_dir, macro, bump):
    """A copy of the installed fastpe.h whose `macro` is bumped: what an extension
    built against another fastpe release would have compiled in."""
    with open(os.path.join(fastpe.get_include(), "fastpe.h")) as f:
        text = f.read()
    # an editable install's header includes the library's from the source tree,
    # which a copy elsewhere cannot find: copy that in, as an installed one has it
    native = '#include "../../../lib/include/fastpe/fastpe.h"'
    if native in text:
        with open(os.path.join(fastpe.get_include(), native.split('"')[1])) as f:
            text = text.replace(native, f.read())
    new, n = re.subn(
        rf"#define {macro}\s+(\d+)", lambda m: f"#define {macro} {int(m[1]) + bump}", text
    )
    assert n == 1, f"{macro} not found in fastpe.h"
    dest_dir.mkdir()
    (dest_dir / "fastpe.h").write_text(new)
    return str(dest_dir)


@pytest.fixture(scope="session")
def probes(tmp_path_factory):
    reason = no_compiler_reason()
    if reason:
        pytest.skip(f"cannot build the C-API probe: {reason}")
    work = tmp_path_factory.mktemp("capi")
    variants = {
        "fastpe_capi_probe": fastpe.get_include(),
        "fastpe_capi_probe_newmajor": _tampered_header(work / "hdr_major", "FASTPE_ABI_MAJOR", 1),
        "fastpe_capi_probe_newminor": _tampered_header(work / "hdr_minor", "FASTPE_ABI_MINOR", 1),
    }
    threads = [] if sys.platform == "win32" else ["-pthread"]
    exts = []
    for name, include in variants.items():
        shutil.copy(EXT_DIR / "fastpe_capi_probe.c", work / f"{name}.c")
        exts.append(
            dict(
                name=name,
                sources=[f"{name}.c"],
                include_dirs=[include],
                define_macros=[("PROBE_NAME", name)],
                extra_compile_args=quick_cflags() + threads,
                extra_link_args=threads,
            )
        )
    build(work, exts)
    return work


@pytest.fixture(scope="session")
def probe(probes):
    return load(probes, "fastpe_capi_probe")


def test_header_constants_agree_with_the_kernel(probe):
    hdr = probe.constants()
    assert {k: hdr[k] for k in CODES} == CODES
    assert (hdr["FASTPE_ABI_MAJOR"], hdr["FASTPE_ABI_MINOR"]) == fastpe.kernel.C_API_VERSION
    assert hdr["FASTPE_CAPSULE_NAME"] == "fastpe.kernel._C_API"
    assert hdr["FASTPE_ENOTIMPORTED"] not in CODES.values()


def test_capsule_table_version_and_size(probe):
    major, minor, size, header_size = probe.table()
    assert (major, minor) == fastpe.kernel.C_API_VERSION
    assert size >= header_size > 0


# ---------------------------------------------------------------- results


@pytest.mark.parametrize("kind", ["f", "d"])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize(
    "seq_len, d_model, offset, num_threads",
    [(1, 1, 0, 0), (97, 101, 0, 0), (97, 101, -13, 3), (600, 64, 100_003, 2), (5, 7, 2**20, 1)],
)
def test_fill_matches_sinusoidal(probe, kind, layout, seq_len, d_model, offset, num_threads):
    out = np.full((seq_len, d_model), SENTINEL, DTYPE[kind])
    code = probe.fill(
        out, kind, seq_len, d_model, d_model, 10000.0, offset, LAYOUT[layout], num_threads
    )
    assert code == CODES["FASTPE_OK"]
    expected = fastpe.sinusoidal(seq_len, d_model, offset=offset, layout=layout, dtype=DTYPE[kind])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("kind", ["f", "d"])
def test_row_stride_fills_a_column_window_only(probe, kind):
    """row_stride is in elements: out = M + col0 with row_stride = M's width."""
    S, W, D, col0 = 40, 50, 17, 9
    M = np.full((S, W), SENTINEL, DTYPE[kind])
    tail = M.reshape(-1)[col0:]  # C-contiguous, starts at M[0, col0]
    code = probe.fill(tail, kind, S, D, W, 500.0, 3, LAYOUT["split"], 0)
    assert code == CODES["FASTPE_OK"]
    expected = fastpe.sinusoidal(S, D, base=500.0, offset=3, layout="split", dtype=DTYPE[kind])
    np.testing.assert_array_equal(M[:, col0 : col0 + D], expected)
    outside = np.ones(M.shape, bool)
    outside[:, col0 : col0 + D] = False
    assert np.all(M[outside] == SENTINEL)


# ---------------------------------------------------------------- invalid arguments

GOOD = dict(seq_len=3, d_model=4, row_stride=4, base=10000.0, offset=0, layout=0)


@pytest.mark.parametrize(
    "change, code",
    [
        (dict(out=None), "FASTPE_ENULL"),
        (dict(out=None, seq_len=0), "FASTPE_OK"),
        (dict(seq_len=-1), "FASTPE_ESIZE"),
        (dict(seq_len=-(2**63)), "FASTPE_ESIZE"),
        (dict(d_model=0), "FASTPE_ESIZE"),
        (dict(d_model=-4), "FASTPE_ESIZE"),
        (dict(out=None, d_model=0), "FASTPE_ESIZE"),
        (dict(row_stride=3), "FASTPE_ESTRIDE"),
        (dict(row_stride=0), "FASTPE_ESTRIDE"),
        (dict(row_stride=-4), "FASTPE_ESTRIDE"),
        (dict(base=float("nan")), "FASTPE_EBASE"),
        (dict(base=float("inf")), "FASTPE_EBASE"),
        (dict(base=float("-inf")), "FASTPE_EBASE"),
        (dict(base=0.0), "FASTPE_EBASE"),
        (dict(base=-10000.0), "FASTPE_EBASE"),
        (dict(layout=2), "FASTPE_ELAYOUT"),
        (dict(layout=-1), "FASTPE_ELAYOUT"),
        (dict(offset=2**62), "FASTPE_ERANGE"),
        (dict(offset=-(2**62)), "FASTPE_ERANGE"),
        (dict(offset=INT64_MAX), "FASTPE_ERANGE"),  # offset + seq_len would overflow
        (dict(offset=-(2**63)), "FASTPE_ERANGE"),
        (dict(base=1e-300), "FASTPE_ERANGE"),  # base < 1: huge frequencies
    ],
)
@pytest.mark.parametrize("kind", ["f", "d"])
def test_invalid_arguments_return_the_code_and_write_nothing(probe, change, code, kind):
    args = {**GOOD, **change}
    out = np.full(64, SENTINEL, DTYPE[kind])
    target = args.pop("out", out)
    got = probe.fill(
        target,
        kind,
        args["seq_len"],
        args["d_model"],
        args["row_stride"],
        args["base"],
        args["offset"],
        args["layout"],
        0,
    )
    assert got == CODES[code]
    assert np.all(out == SENTINEL)


def test_row_stride_is_irrelevant_for_a_single_row(probe):
    out = np.full(4, SENTINEL)
    assert probe.fill(out, "d", 1, 4, 0, 10000.0, 7, 0, 0) == CODES["FASTPE_OK"]
    np.testing.assert_array_equal(out, fastpe.sinusoidal(1, 4, offset=7, dtype=np.float64)[0])


def test_same_limit_as_the_python_api(probe):
    limit = fastpe.kernel.max_position(10000.0, 64)
    out = np.empty((2, 64))
    assert probe.fill(out, "d", 1, 64, 64, 10000.0, limit - 1, 0, 0) == CODES["FASTPE_OK"]
    assert probe.fill(out, "d", 2, 64, 64, 10000.0, limit, 0, 0) == CODES["FASTPE_ERANGE"]


def test_calling_before_import_fastpe_returns_a_code(probe):
    """The header's wrappers guard the table pointer instead of crashing."""
    not_imported = probe.constants()["FASTPE_ENOTIMPORTED"]
    assert not_imported == 100  # documented value, outside the kernel's codes
    assert probe.call_unimported() == (not_imported, not_imported)


# ---------------------------------------------------------------- threads


@pytest.mark.skipif(sys.platform == "win32", reason="the probe uses POSIX threads")
def test_concurrent_calls_from_native_threads(probe):
    """Six threads that never hold the GIL (nor a Python thread state) call the
    C API at once, each with its own table, dtype, layout and thread count."""
    jobs, expected = [], []
    for t in range(6):
        kind = "fd"[t % 2]
        layout = ["interleaved", "split"][(t // 2) % 2]
        S, D, offset, nt = 500 + 37 * t, 130 - t, 1000 * t - 2500, [1, 2, 0][t % 3]
        out = np.full((S, D), SENTINEL, DTYPE[kind])
        jobs.append((out, kind, S, D, D, 10000.0, offset, LAYOUT[layout], nt))
        expected.append(fastpe.sinusoidal(S, D, offset=offset, layout=layout, dtype=DTYPE[kind]))
    codes = probe.fill_concurrently(jobs)
    assert codes == [CODES["FASTPE_OK"]] * len(jobs)
    for job, exp in zip(jobs, expected, strict=False):
        np.testing.assert_array_equal(job[0], exp)


# ---------------------------------------------------------------- ABI checks


def test_extension_built_against_a_newer_major_fails_to_import(probes):
    major, minor = fastpe.kernel.C_API_VERSION
    with pytest.raises(
        ImportError,
        match=rf"compiled against the fastpe C API {major + 1}\.{minor}"
        rf".*incompatible C API {major}\.{minor}.*rebuild",
    ):
        load(probes, "fastpe_capi_probe_newmajor")


def test_extension_built_against_a_newer_minor_fails_to_import(probes):
    major, minor = fastpe.kernel.C_API_VERSION
    with pytest.raises(
        ImportError,
        match=rf"compiled against the fastpe C API {major}\.{minor + 1}"
        rf".*provides only C API {major}\.{minor}.*upgrade fastpe",
    ):
        load(probes, "fastpe_capi_probe_newminor")


@pytest.mark.parametrize(
    "replacement, match",
    [
        (datetime.datetime_CAPI, 'not a "fastpe.kernel._C_API" capsule'),  # another capsule
        (object(), 'not a "fastpe.kernel._C_API" capsule'),
        (None, "no _C_API"),  # deleted: a fastpe from before the C API
    ],
)
def test_import_fastpe_rejects_a_wrong_capsule(probe, monkeypatch, replacement, match):
    if replacement is None:
        monkeypatch.delattr(fastpe.kernel, "_C_API")
    else:
        monkeypatch.setattr(fastpe.kernel, "_C_API", replacement)
    with pytest.raises(ImportError, match=match):
        probe.reimport()
    monkeypatch.undo()
    probe.reimport()  # and succeeds again with the real capsule


# ---------------------------------------------------------------- known kernel gap

_CALL_THROUGH_CTYPES = r"""
import ctypes, sys
import numpy as np
import fastpe.kernel as k

ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
FILL = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                        ctypes.c_int64, ctypes.c_double, ctypes.c_int64, ctypes.c_int,
                        ctypes.c_int)

class Table(ctypes.Structure):  # fastpe_api_t, ABI 1.0
    _fields_ = [("abi_major", ctypes.c_uint32), ("abi_minor", ctypes.c_uint32),
                ("size", ctypes.c_size_t), ("fill_f32", FILL), ("fill_f64", FILL)]

table = Table.from_address(
    ctypes.pythonapi.PyCapsule_GetPointer(k._C_API, b"fastpe.kernel._C_API"))
buf = np.zeros(16, np.float32)
d_model = int(sys.argv[1])
print(table.fill_f32(buf.ctypes.data, 1, d_model, d_model, 10000.0, 0, 0, 1))
"""


@pytest.mark.parametrize("d_model", [2**62, 2**63 - 1])
def test_absurd_width_returns_a_code_instead_of_crashing(d_model):
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", _CALL_THROUGH_CTYPES, str(d_model)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout) in (CODES["FASTPE_ESIZE"], CODES["FASTPE_ENOMEM"])


@pytest.mark.parametrize("name", ["vaswani", "fairseq", "diffusers", "tensor2tensor", "gptj"])
def test_spec_wrappers_fill_every_convention(probe, name):
    raw = probe.spec_table(name, 24, 30, -4)
    got = np.frombuffer(raw, np.float64).reshape(30, 24)
    np.testing.assert_array_equal(
        got, fastpe.sinusoidal(30, 24, offset=-4, dtype=np.float64, convention=name)
    )


def test_spec_wrappers_raise_the_python_errors(probe):
    with pytest.raises(ValueError, match="convention"):
        probe.spec_table("nope", 8, 1, 0)
