"""Coverage-guided fuzzing of fastpe's public API with atheris (libFuzzer).

    python tools/fuzz_api.py -max_total_time=30        # bounded run (CI)
    python tools/fuzz_api.py -runs=100000 corpus_dir/   # longer, keeps a corpus

Each input is decoded into a call of fastpe.sinusoidal or fastpe.reference
(arguments drawn from hostile values and raw fuzzer integers/floats, out= views
carved from a canary-filled buffer).  Allowed outcomes: the documented result,
or ValueError/TypeError/MemoryError.  Anything else -- another exception type,
a wrong result, a write outside out=, a crash -- stops the fuzzer with the
reproducing input.  Without atheris (it has no wheel for this platform) the
script says so and exits 0.
"""

import math
import operator
import os
import sys

try:
    import atheris
except ImportError:  # pragma: no cover
    print("fuzz_api.py: atheris is not installed (pip install atheris); fuzzing skipped")
    sys.exit(0)

import numpy as np

with atheris.instrument_imports():
    import fastpe

ACCEPTED = (ValueError, TypeError, MemoryError)
RAM = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
CANARY = 0xA5
HOSTILE = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31,
    2**40,
    2**62,
    2**63,
    -(2**63),
    10**400,
    -(10**30),
    0.0,
    -0.0,
    1.5,
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    1e305,
    5e-324,
    "3",
    b"3",
    "split",
    "interleaved",
    [],
    (3,),
    1 + 2j,
    np.int8(-3),
    np.uint64(2**64 - 1),
    np.float16(3),
    np.float32("nan"),
    np.longdouble(1e4),
    np.bool_(True),
    np.array(4),
    np.array([4]),
    np.array(4, dtype=object),
    np.datetime64(3, "s"),
    np.float32,
    np.float64,
    "f8",
    ">f8",
    np.int32,
    object,
    "f4,",
]
DTYPES = [
    None,
    np.float32,
    np.float64,
    "f4",
    "f8",
    ">f8",
    np.float16,
    "bfloat16",
    np.int64,
    object,
    "f4,",
]
LAYOUTS = ["interleaved", "split", "SPLIT", "", 1, None]


def value(fdp, plausible):
    """A plausible value, a hostile one, or a raw fuzzer number."""
    pick = fdp.ConsumeIntInRange(0, 9)
    if pick < 6:
        return plausible()
    if pick < 8:
        return HOSTILE[fdp.ConsumeIntInRange(0, len(HOSTILE) - 1)]
    return fdp.ConsumeInt(9) if pick == 8 else fdp.ConsumeFloat()


def make_out(fdp, shape):
    """(out, buffer, covered-bytes mask) with canary bytes around the view."""
    S, D = shape
    dt = np.dtype(
        [np.float32, np.float64, ">f8", np.int32, np.float16][fdp.ConsumeIntInRange(0, 4)]
    )
    isz = dt.itemsize
    extra = fdp.ConsumeIntInRange(0, 3)
    shift = fdp.ConsumeIntInRange(0, 1) * fdp.ConsumeIntInRange(0, isz - 1)
    row = [(D + extra) * isz, 0, isz, -(D + extra) * isz][fdp.ConsumeIntInRange(0, 3)]
    strides = (row, isz) if fdp.ConsumeBool() else (isz, max(S, 1) * isz)
    span = sum((n - 1) * abs(s) for n, s in zip(shape, strides, strict=False)) if S and D else 0
    buf = np.full(span + isz + 128, CANARY, np.uint8)
    start = 64 + shift + (max(S - 1, 0) * -strides[0] if strides[0] < 0 else 0)
    out = np.ndarray(shape, dt, buffer=buf, offset=start, strides=strides)
    marker = np.zeros_like(buf)
    np.ndarray(shape, dt, buffer=marker, offset=start, strides=strides)[...] = np.frombuffer(
        b"\xff" * isz, dt
    )[0]
    if fdp.ConsumeIntInRange(0, 7) == 0:
        out.flags.writeable = False
    return out, buf, marker == 0xFF


def TestOneInput(data):
    fdp = atheris.FuzzedDataProvider(data)
    use_ref = fdp.ConsumeIntInRange(0, 3) == 0
    S = value(fdp, lambda: fdp.ConsumeIntInRange(0, 64))
    D = value(fdp, lambda: fdp.ConsumeIntInRange(1, 64))
    kw = {}
    if fdp.ConsumeBool():
        kw["base"] = value(fdp, lambda: fdp.ConsumeFloatInRange(1.0001, 1e6))
    if fdp.ConsumeBool():
        kw["offset"] = value(fdp, lambda: fdp.ConsumeIntInRange(-(10**7), 10**7))
    if fdp.ConsumeBool():
        kw["dtype"] = value(fdp, lambda: DTYPES[fdp.ConsumeIntInRange(0, len(DTYPES) - 1)])
    if fdp.ConsumeBool():
        kw["layout"] = value(fdp, lambda: LAYOUTS[fdp.ConsumeIntInRange(0, len(LAYOUTS) - 1)])
    if not use_ref and fdp.ConsumeBool():
        kw["num_threads"] = value(fdp, lambda: fdp.ConsumeIntInRange(1, 4))
    # Valid-but-big tables would really be allocated and filled: not the point here.
    try:
        s, d = operator.index(S), operator.index(D)  # NumPy integers, 0-d arrays too
    except TypeError:
        pass
    else:
        if s > 0 and d > 0 and s * d * 8 > 2**22 and s * d * 4 <= 2 * RAM:
            return
    guard = None
    if not use_ref and fdp.ConsumeBool():
        try:
            shape = (operator.index(S), operator.index(D))
        except TypeError:
            shape = (3, 4)
        if not (0 <= shape[0] <= 64 and 1 <= shape[1] <= 64):
            shape = (3, 4)
        kw["out"], buf, mask = make_out(fdp, shape)
        guard = (buf, mask, buf.copy())

    fn = fastpe.reference if use_ref else fastpe.sinusoidal
    try:
        res = fn(S, D, **kw)
    except ACCEPTED:
        if guard is not None and not np.array_equal(guard[0], guard[2]):
            raise AssertionError(
                f"out written by a failed call: {fn.__name__}({S!r}, {D!r}, **{kw!r})"
            ) from None
        return
    # Accepted: check the documented result.
    S, D = int(S), int(D)
    assert isinstance(res, np.ndarray) and res.shape == (S, D), (res, S, D)
    assert res.dtype.name in ("float16", "bfloat16", "float32", "float64") and res.dtype.isnative
    if "out" in kw:
        assert res is kw["out"]
        buf, mask, before = guard
        assert np.array_equal(buf[~mask], before[~mask]), "write outside out="
    if S:
        base = float(kw.get("base", 10000.0))
        ref = fastpe.reference(
            S,
            D,
            base=base,
            offset=int(kw.get("offset", 0)),
            layout=kw.get("layout", "interleaved"),
        )
        nf = (D + 1) // 2
        try:
            w = 1.0 if base >= 1 else base ** (-2.0 * (nf - 1) / D)
        except OverflowError:  # a tiny base: the reference is meaningless, only NaN is checked
            w = math.inf
        off = int(kw.get("offset", 0))
        # half an ulp of the output type at 1, beside the float64 result's own error
        half_ulp = {"float16": 2.0**-11, "bfloat16": 2.0**-8}.get(res.dtype.name, 2.0**-23)
        tol = 1e-12 + 16 * max(abs(off), abs(off + S)) * w * 2.0**-53 + half_ulp
        assert np.max(np.abs(res.astype(np.float64) - ref)) <= tol, (S, D, kw)


if __name__ == "__main__":
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()
