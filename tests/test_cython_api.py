"""The Cython API: ``from fastpe.kernel cimport fill_f32, fill_f64`` in another
extension, built at test time against the installed package's .pxd files and
called inside that extension's own ``prange``.  Results are compared bitwise
with fastpe.sinusoidal."""

import os
import shutil

import numpy as np
import pytest
from extbuild import EXT_DIR, build, load, no_compiler_reason, openmp_flags, quick_cflags

import fastpe
import fastpe.kernel

CODES = fastpe.kernel._C_CONSTANTS
SENTINEL = -7.0


@pytest.fixture(scope="session")
def cy_probe(tmp_path_factory):
    reason = no_compiler_reason()
    if reason:
        pytest.skip(f"cannot build the Cython probe: {reason}")
    pytest.importorskip("Cython", reason="Cython is needed to build the Cython probe")
    work = tmp_path_factory.mktemp("cython_api")
    shutil.copy(EXT_DIR / "fastpe_cython_probe.pyx", work)
    omp = openmp_flags()
    ext = dict(
        name="fastpe_cython_probe",
        sources=["fastpe_cython_probe.pyx"],
        extra_compile_args=quick_cflags(),
    )
    try:
        build(
            work,
            [dict(ext, extra_compile_args=ext["extra_compile_args"] + omp, extra_link_args=omp)],
            cythonize=True,
        )
        openmp = True
    except RuntimeError:  # no OpenMP in this compiler: the prange runs serially
        build(work, [ext], cythonize=True)
        openmp = False
    return load(work, "fastpe_cython_probe"), openmp


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["interleaved", "split"])
@pytest.mark.parametrize("inner_threads", [1, 2, 0])
def test_fill_inside_a_prange(cy_probe, dtype, layout, inner_threads):
    """7 tables of 61 rows filled by 4 threads of the probe's prange; each table
    is written into the first 33 columns of a 40-wide slab (row stride 40)."""
    mod, _ = cy_probe
    n, S, W, D, first, step = 7, 61, 40, 33, -100, 1009
    out = np.full((n, S, W), SENTINEL, dtype)
    codes, _tids = mod.fill_tables(
        out, D, first, step, 1000.0, mod.LAYOUTS[layout], 4, inner_threads
    )
    assert codes == [CODES["FASTPE_OK"]] * n
    for t in range(n):
        expected = fastpe.sinusoidal(
            S, D, base=1000.0, offset=first + t * step, layout=layout, dtype=dtype
        )
        np.testing.assert_array_equal(out[t, :, :D], expected, err_msg=f"table {t}")
    assert np.all(out[:, :, D:] == SENTINEL)


def test_prange_really_ran_on_several_threads(cy_probe):
    mod, openmp = cy_probe
    if not openmp:
        pytest.skip("the probe was built without OpenMP (the compiler has none)")
    if os.environ.get("OMP_THREAD_LIMIT") or os.environ.get("OMP_DYNAMIC", "").lower() == "true":
        pytest.skip("OMP_THREAD_LIMIT/OMP_DYNAMIC may shrink the team")
    out = np.zeros((8, 300, 64), np.float32)
    codes, tids = mod.fill_tables(out, 64, 0, 300, 10000.0, 0, 4, 1)
    assert codes == [0] * 8
    # schedule(static, 1) over 4 threads: table t is filled by thread t % 4
    assert tids == [t % 4 for t in range(8)]
    np.testing.assert_array_equal(out.reshape(-1, 64), fastpe.sinusoidal(2400, 64))


@pytest.mark.parametrize(
    "args, code",
    [
        (dict(base=0.0), "FASTPE_EBASE"),
        (dict(layout=9), "FASTPE_ELAYOUT"),
        (dict(row_stride=3), "FASTPE_ESTRIDE"),
        (dict(offset=2**62), "FASTPE_ERANGE"),
        (dict(seq_len=-1), "FASTPE_ESIZE"),
        (dict(), "FASTPE_OK"),
    ],
)
def test_codes_through_cimport(cy_probe, args, code):
    mod, _ = cy_probe
    out = np.full((4, 4), SENTINEL)
    kw = {**dict(seq_len=4, d_model=4, row_stride=4, base=10000.0, offset=0, layout=0), **args}
    assert (
        mod.fill_raw_f64(
            out,
            kw["seq_len"],
            kw["d_model"],
            kw["row_stride"],
            kw["base"],
            kw["offset"],
            kw["layout"],
        )
        == CODES[code]
    )
    if code == "FASTPE_OK":
        np.testing.assert_array_equal(out, fastpe.sinusoidal(4, 4, dtype=np.float64))
    else:
        assert np.all(out == SENTINEL)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("convention", ["diffusers", "tensor2tensor", "fairseq", "vaswani"])
def test_compiled_encoding_through_cimport(cy_probe, dtype, convention):
    mod, _ = cy_probe
    d, offset, scale = 10, 3, 0.5
    table = np.full((6, d), SENTINEL, dtype)
    at = np.full((4, d), SENTINEL, dtype)
    positions = np.array([0.0, 2.5, 7.0, -1.25])
    x = np.random.default_rng(0).standard_normal((2, 5, d)).astype(dtype)
    x0 = x.copy()
    codes = mod.spec_tables(convention, d, table, offset, at, positions, x, scale)
    assert codes == (0, 0, 0, d)
    kw = dict(convention=convention, dtype=dtype)
    np.testing.assert_array_equal(table, fastpe.sinusoidal(6, d, offset=offset, **kw))
    np.testing.assert_array_equal(at, fastpe.sinusoidal_at(positions, d, **kw))
    np.testing.assert_array_equal(
        x, fastpe.add_to(x0, offset=offset, scale=scale, convention=convention)
    )


def test_compiled_encoding_from_knobs_through_cimport(cy_probe):
    mod, _ = cy_probe
    assert mod.spec_knobs(12, 500.0, b"h", 0.0) == 12
    with pytest.raises(ValueError, match="base"):
        mod.spec_knobs(12, -1.0, b"h", 0.0)
    with pytest.raises(ValueError, match="denominator"):
        mod.spec_knobs(12, 500.0, b"sideways", 0.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rope_inside_a_prange(cy_probe, dtype, rng):
    """Eight decoding steps rotated by four threads of the probe's prange through one
    cimported RoPE handle, and its cache: bitwise fastpe.apply_rope / rope_cache."""
    mod, _ = cy_probe
    params = {"rope_type": "linear", "factor": 4.0}
    q0 = rng.standard_normal((8, 4, 1, 64)).astype(dtype)
    q = q0.copy()
    cos, sin = np.empty((8, 64), dtype), np.empty((8, 64), dtype)
    codes, c, dim = mod.rope_steps(params, q, 5000, cos, sin, 4)
    assert codes == [CODES["FASTPE_OK"]] * 8 and c == CODES["FASTPE_OK"] and dim == 64
    for t in range(8):
        want = fastpe.apply_rope(q0[t : t + 1].copy(), rope_parameters=params, offset=5000 + t)
        np.testing.assert_array_equal(q[t : t + 1], want)
    want_cos, want_sin = fastpe.rope_cache(64, params, seq_len=8, offset=5000, dtype=dtype)
    np.testing.assert_array_equal(cos, want_cos)
    np.testing.assert_array_equal(sin, want_sin)
