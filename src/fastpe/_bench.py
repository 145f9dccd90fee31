"""Side-by-side benchmark: fastpe against the NumPy and PyTorch formulas.

Run as ``fastpe bench`` (or ``python -m fastpe bench``, ``python bench/compare.py``).
Everything in one table comes from one run on one machine: medians of repeated
calls, ratios computed from those medians, and each method's max absolute error
against mpmath on a fixed sample of entries, so speed and accuracy sit side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial

import numpy as np

from . import _api, _rope_apply, _rope_cache

# --------------------------------------------------------------------------- competitors


def seed_numpy_f64(seq_len: int, d_model: int) -> np.ndarray:
    """The tutorials' vectorised NumPy version (seed 004), float64."""
    pos_encoding = np.zeros((seq_len, d_model))
    position = np.arange(seq_len)[:, np.newaxis]
    div_term = np.exp(np.arange(0, d_model, 2) * -(np.log(10000.0) / d_model))
    pos_encoding[:, 0::2] = np.sin(position * div_term)
    pos_encoding[:, 1::2] = np.cos(position * div_term)
    return pos_encoding


def numpy_f32(seq_len: int, d_model: int) -> np.ndarray:
    """The same formula computed in float32 end to end (what float32 pipelines write)."""
    pos_encoding = np.zeros((seq_len, d_model), dtype=np.float32)
    position = np.arange(seq_len, dtype=np.float32)[:, np.newaxis]
    div_term = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-(np.log(10000.0) / d_model))
    )
    angle = position * div_term
    pos_encoding[:, 0::2] = np.sin(angle)
    pos_encoding[:, 1::2] = np.cos(angle)
    return pos_encoding


def _torch_methods() -> dict[str, Callable[[int, int], np.ndarray]]:
    try:
        import torch
    except ImportError:
        return {}

    def torch_tutorial(seq_len: int, d_model: int) -> np.ndarray:
        # PyTorch tutorial (beginner_source/transformer_tutorial.py), float32
        position = torch.arange(seq_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(seq_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        return pe.numpy()

    methods: dict[str, Callable[[int, int], np.ndarray]] = {"PyTorch tutorial f32": torch_tutorial}
    try:
        from positional_encodings.torch_encodings import PositionalEncoding1D
    except ImportError:
        return methods

    def positional_encodings_1d(seq_len: int, d_model: int) -> np.ndarray:
        # a new module per call: the package caches its table by input shape
        enc = PositionalEncoding1D(d_model)
        return enc(torch.zeros(1, seq_len, d_model))[0].numpy()

    methods["positional-encodings 1D"] = positional_encodings_1d
    return methods


# --------------------------------------------------------------------------- accuracy


def _sample(seq_len: int, d_model: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234)
    rows = np.concatenate([rng.integers(0, seq_len, n - 8), np.full(8, seq_len - 1)])
    cols = rng.integers(0, d_model, n)
    return rows, cols


def _exact(rows: np.ndarray, cols: np.ndarray, d_model: int) -> np.ndarray:
    import mpmath

    out = np.empty(rows.size)
    with mpmath.workdps(40):
        for n, (k, j) in enumerate(zip(rows, cols, strict=False)):
            x = mpmath.mpf(int(k)) * mpmath.power(10000, -mpmath.mpf(2 * (int(j) // 2)) / d_model)
            out[n] = float(mpmath.sin(x) if j % 2 == 0 else mpmath.cos(x))
    return out


def _max_error(table: np.ndarray, rows, cols, exact) -> float:
    # float64(exact) is within 2^-54 relative of the truth: enough to rank methods
    return float(np.max(np.abs(table[rows, cols].astype(np.float64) - exact)))


# --------------------------------------------------------------------------- timing


def _median_times(
    fns: dict[str, Callable[[], object]], min_repeats: int, budget: float
) -> dict[str, float]:
    """Median time of each function: one unrecorded warm-up call (imports, page
    faults of cached buffers, thread-pool start), then back-to-back calls for
    ``budget`` seconds (at least ``min_repeats``, at most 200), one function
    after the other.  (Interleaving the functions call by call was tried: each
    then pays for what the previous one left -- the OS pages another's
    allocations returned, evicted caches -- and the medians measured that
    interference rather than the functions.)"""
    out = {}
    for name, fn in fns.items():
        fn()
        times: list[float] = []
        t_start = time.perf_counter()
        while len(times) < min_repeats or (
            time.perf_counter() - t_start < budget and len(times) < 200
        ):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times))
    return out


class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled = total, 0, enabled

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            width = 30
            filled = int(width * self.done / self.total)
            sys.stderr.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] "
                f"{self.done}/{self.total} {label[:40]:<40}"
            )
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 80 + "\r")
            sys.stderr.flush()


# --------------------------------------------------------------------------- the run

FULL_SIZES = [(512, 512), (4096, 1024), (16384, 1024)]
# Row names: new array and out= use all threads (num_threads=None); a 1-thread row shows scaling.
FASTPE = "fastpe (all threads)"
FASTPE_OUT = "fastpe out= (all threads)"
FASTPE_1 = "fastpe (1 thread)"
QUICK_SIZES = [(512, 512), (4096, 1024)]


def measure(sizes, *, quick: bool = False, progress: bool = False, accuracy: bool = True) -> dict:
    """Time every method on every size and dtype; returns a JSON-able dict."""
    torch_methods = _torch_methods()
    min_repeats, budget = (3, 0.3) if quick else (7, 1.0)
    plan = []
    for S, D in sizes:
        for dt in ("float32", "float64"):
            plan.append((S, D, dt))
    prog = _Progress(len(plan), progress)
    rows_out = []
    for S, D, dt in plan:
        dtype = np.dtype(dt)
        rows, cols = _sample(S, D, 24 if quick else 64)
        exact = _exact(rows, cols, D) if accuracy else None
        out = np.empty((S, D), dtype=dtype)
        _api.sinusoidal(S, D, out=out)
        methods: dict[str, tuple[Callable[[], object], Callable[[], object] | None]] = {
            FASTPE: (
                lambda: _api.sinusoidal(S, D, dtype=dtype),
                lambda: _api.sinusoidal(S, D, dtype=dtype),
            ),
            FASTPE_OUT: (lambda: _api.sinusoidal(S, D, out=out), None),
            FASTPE_1: (lambda: _api.sinusoidal(S, D, dtype=dtype, num_threads=1), None),
            "out.fill() [memory limit]": (lambda: out.fill(0.5), None),
            "np.empty().fill()": (lambda: np.empty((S, D), dtype=dtype).fill(0.5), None),
        }
        if dt == "float64":
            methods["NumPy seed formula f64"] = (
                lambda: seed_numpy_f64(S, D),
                lambda: seed_numpy_f64(S, D),
            )
        else:
            methods["NumPy formula f32"] = (lambda: numpy_f32(S, D), lambda: numpy_f32(S, D))
            for name, fn in torch_methods.items():
                call: Callable[[], object] = partial(fn, S, D)
                methods[name] = (call, call)
        medians = _median_times({n: f for n, (f, _) in methods.items()}, min_repeats, budget)
        entries = {}
        for name, (_, table_fn) in methods.items():
            err = None
            if accuracy and table_fn is not None:
                err = _max_error(np.asarray(table_fn()), rows, cols, exact)
            t = medians[name]
            entries[name] = {
                "median_s": t,
                "ns_per_element": t / (S * D) * 1e9,
                "max_abs_error": err,
            }
        prog.step(f"{S}x{D} {dt}")
        checks = _table_checks(S, D, dtype, entries[FASTPE]["max_abs_error"])
        rows_out.append(
            {"seq_len": S, "d_model": D, "dtype": dt, "methods": entries, "checks": checks}
        )
    prog.close()
    return {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "build_info": _api.build_info(),
        "quick": quick,
        "results": rows_out,
    }


# The error bounds the test suite asserts (tests/test_accuracy.py): a wrong table, not a
# slow one, is what makes `fastpe bench` fail.
ERROR_BOUND = {"float64": 1e-15, "float32": 2.0**-24}


def _check(what: str, ok: bool, detail: str) -> dict:
    return {"what": what, "ok": bool(ok), "detail": detail}


def _table_checks(S: int, D: int, dtype: np.dtype, max_error: float | None) -> list[dict]:
    """Correctness of the timed fastpe tables: the error against mpmath within the
    suite's bound, and the out= and one-thread tables bitwise the new array's."""
    tag = f"{S}x{D} {dtype.name}"
    checks = []
    if max_error is not None:
        bound = ERROR_BOUND[dtype.name]
        checks.append(
            _check(
                f"{tag}: fastpe max |err| against mpmath",
                max_error <= bound,
                f"{max_error:.1e} (bound {bound:.1e})",
            )
        )
    new = _api.sinusoidal(S, D, dtype=dtype)
    out = np.full((S, D), np.nan, dtype=dtype)
    _api.sinusoidal(S, D, out=out)
    one = _api.sinusoidal(S, D, dtype=dtype, num_threads=1)
    same = np.array_equal(new, out) and np.array_equal(new, one)
    checks.append(_check(f"{tag}: out= and 1-thread tables equal the new array", same, "bitwise"))
    return checks


def all_checks(result: dict) -> list[dict]:
    """Every correctness check of a run (empty lists for the sections not run)."""
    out = [c for r in result["results"] for c in r.get("checks", [])]
    if result.get("rope"):
        out += result["rope"].get("checks", [])
    return out


ADD_LIMIT = "np.add(x, table, out=x) [limit]"


def measure_add_to(shape, *, quick: bool = False) -> dict:
    """Fused ``fastpe.add_to`` against the best NumPy equivalents with a precomputed
    table, on the same (batch, seq_len, d_model) float32 array, in one run."""
    B, S, D = shape
    min_repeats, budget = (3, 0.3) if quick else (5, 1.0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    table = _api.sinusoidal(S, D)
    positions = np.broadcast_to(np.arange(S), (B, S))
    scale = np.float32(0.5)  # keeps repeated in-place updates bounded (no inf/denormals)

    def numpy_broadcast():
        np.multiply(x, scale, out=x)
        np.add(x, table, out=x)

    def numpy_gather():
        np.multiply(x, scale, out=x)
        np.add(x, table[positions], out=x)

    # x += PE against np.add of the precomputed table: one read and one write of
    # x, the memory limit (each call adds values in [-1, 1]: x stays finite)
    res = _median_times(
        {
            "fastpe.add_to": lambda: _api.add_to(x, scale=0.5),
            "fastpe.add_to positions=": lambda: _api.add_to(x, positions=positions, scale=0.5),
            "NumPy x*=s; x+=table": numpy_broadcast,
            "NumPy x*=s; x+=table[positions]": numpy_gather,
            "fastpe.add_to(x) [scale 1]": lambda: _api.add_to(x),
            ADD_LIMIT: lambda: np.add(x, table, out=x),
        },
        min_repeats,
        budget,
    )
    return {"shape": list(shape), "dtype": "float32", "median_s": res}


# --------------------------------------------------------------------------- RoPE


def numpy_rotate_half(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """transformers' LLaMA ``x * cos + rotate_half(x) * sin``, in NumPy."""
    h = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos + rotated * sin


def _transformers_apply() -> Callable | None:
    try:
        import torch
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError:
        return None
    torch.set_num_threads(_api.build_info()["max_threads"])
    return apply_rotary_pos_emb


def _qwen2_vl_pair(q: np.ndarray, k: np.ndarray) -> dict[str, Callable[[], object]]:
    """fastpe.apply_rope with Qwen2-VL's sections on q and k in place, and transformers'
    own Qwen2-VL rotary path on copies of them (its rotary module's cos/sin from (3,
    batch, seq) position ids, then its apply); empty without torch and transformers.
    The positions: one image of seq / 64 rows of 64 patches."""
    try:
        import torch
        from transformers import Qwen2VLTextConfig
        from transformers.models.qwen2_vl import modeling_qwen2_vl as m
    except ImportError:
        return {}
    from . import rope_presets

    heads, seq, head_dim = q.shape[1], q.shape[2], q.shape[3]
    cfg = Qwen2VLTextConfig(
        hidden_size=heads * head_dim,
        num_attention_heads=heads,
        head_dim=head_dim,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
    )
    rot = m.Qwen2VLRotaryEmbedding(cfg)
    kw = rope_presets.qwen2_vl(cfg).kwargs()
    s = np.arange(seq)
    pos = np.stack([np.zeros_like(s), s // 64, s % 64], -1).astype(np.int64)
    ids = torch.from_numpy(np.ascontiguousarray(pos.T[:, None]))
    tq, tk = torch.from_numpy(q.copy()), torch.from_numpy(k.copy())
    # (transformers before 5 recomposed the sections in the apply instead)
    multi = getattr(m, "apply_multimodal_rotary_pos_emb", None)

    def theirs() -> object:
        cos, sin = rot(tq, ids)
        if multi is not None:
            return multi(tq, tk, cos, sin, [16, 24, 24])
        return m.apply_rotary_pos_emb(tq, tk, cos, sin)

    return {
        "fastpe.apply_rope(q, k) Qwen2-VL 3-axis": lambda: _rope_apply.apply_rope(
            q, k, positions=pos, **kw
        ),
        "transformers Qwen2-VL rotary + apply": theirs,
    }


def _copy_both(dq: np.ndarray, q: np.ndarray, dk: np.ndarray, k: np.ndarray) -> None:
    np.copyto(dq, q)
    np.copyto(dk, k)


def measure_rope(*, quick: bool = False) -> dict:
    """fastpe.apply_rope on q and k in place, next to one np.copyto pass over each,
    the NumPy rotate_half formula and (torch and transformers installed)
    transformers' apply_rotary_pos_emb given the cache, on the same thread count;
    and one decoding step.  One run."""
    shape = (1, 8, 1024, 128) if quick else (1, 32, 4096, 128)
    min_repeats, budget = (3, 0.3) if quick else (5, 1.0)
    rng = np.random.default_rng(0)
    q = rng.standard_normal(shape, dtype=np.float32)
    k = rng.standard_normal(shape, dtype=np.float32)
    dq, dk = np.empty_like(q), np.empty_like(k)
    cos, sin = _rope_cache.rope_cache(shape[-1], seq_len=shape[-2])
    fns: dict[str, Callable[[], object]] = {
        "fastpe.apply_rope(q, k)": lambda: _rope_apply.apply_rope(q, k),
        "np.copyto q and k [memory pass]": lambda: _copy_both(dq, q, dk, k),
        "NumPy rotate_half formula": lambda: (
            numpy_rotate_half(q, cos, sin),
            numpy_rotate_half(k, cos, sin),
        ),
    }
    # every layout: heads before positions (above) or positions before heads,
    # half-split or interleaved pairs, each against the same copy pass
    qp = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
    kp = np.ascontiguousarray(k.transpose(0, 2, 1, 3))
    for axis, (a, b) in (("heads-first", (q, k)), ("positions-first", (qp, kp))):
        for layout in ("half", "interleaved"):
            if (axis, layout) != ("heads-first", "half"):
                fns[f"apply_rope {axis} {layout}"] = partial(
                    _rope_apply.apply_rope,
                    a,
                    b,
                    seq_axis=-2 if axis == "heads-first" else 1,
                    layout=layout,
                )
    apply_rotary_pos_emb = _transformers_apply()
    if apply_rotary_pos_emb is not None:
        import torch

        tq, tk = torch.from_numpy(q.copy()), torch.from_numpy(k.copy())
        tcos, tsin = torch.from_numpy(cos)[None], torch.from_numpy(sin)[None]
        fns["transformers apply_rotary_pos_emb"] = lambda: apply_rotary_pos_emb(tq, tk, tcos, tsin)
        fns.update(_qwen2_vl_pair(q, k))
    med = _median_times(fns, min_repeats, budget)
    q1 = rng.standard_normal((1, 32, 1, 128), dtype=np.float32)
    k1 = rng.standard_normal((1, 32, 1, 128), dtype=np.float32)
    step = _interleaved_medians(
        {"fastpe decoding step": lambda: _rope_apply.apply_rope(q1, k1, offset=100000)},
        11 if quick else 41,
    )
    med.update(step)
    return {
        "shape": list(shape),
        "dtype": "float32",
        "median_s": med,
        "checks": [_rope_check(q, k, cos, sin)],
    }


def _rope_check(q: np.ndarray, k: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> dict:
    """apply_rope against the NumPy formula it was timed against, on copies of q and k."""
    got_q, got_k = _rope_apply.apply_rope(q.copy(), k.copy())
    want_q, want_k = numpy_rotate_half(q, cos, sin), numpy_rotate_half(k, cos, sin)
    err = max(float(np.max(np.abs(got_q - want_q))), float(np.max(np.abs(got_k - want_k))))
    # float32 inputs of size ~4: the two roundings differ by a few float32 ulps at most
    scale = max(float(np.max(np.abs(want_q))), float(np.max(np.abs(want_k))), 1.0)
    bound = 8 * float(np.finfo(np.float32).eps) * scale
    return _check(
        "apply_rope q, k against the NumPy rotate_half formula",
        err <= bound,
        f"max |diff| {err:.1e} (bound {bound:.1e})",
    )


ROPE_LAYOUTS = [
    f"apply_rope {axis} {layout}"
    for axis in ("heads-first", "positions-first")
    for layout in ("half", "interleaved")
    if (axis, layout) != ("heads-first", "half")
]


def rope_targets(rope: dict) -> list[tuple[str, float, float, str, bool]]:
    med = rope["median_s"]
    fp = med["fastpe.apply_rope(q, k)"]
    # (the copy bound is stated for the standard shape, whose tensors exceed the caches)
    full = rope["shape"] == [1, 32, 4096, 128]
    checks = [
        (
            "apply_rope q, k / np.copyto q, k",
            fp / med["np.copyto q and k [memory pass]"],
            1.5,
            "max" if full else "info-max",
        ),
        ("apply_rope decoding step (us)", med["fastpe decoding step"] * 1e6, 5.0, "max"),
        ("apply_rope vs NumPy rotate_half", med["NumPy rotate_half formula"] / fp, 5.0, "info"),
    ]
    for name in ROPE_LAYOUTS:
        if name in med:
            checks.append(
                (
                    f"{name} / np.copyto q, k",
                    med[name] / med["np.copyto q and k [memory pass]"],
                    1.0,
                    "max" if full else "info-max",
                )
            )
    if "transformers apply_rotary_pos_emb" in med:
        checks.append(
            (
                "apply_rope vs transformers apply_rotary_pos_emb",
                med["transformers apply_rotary_pos_emb"] / fp,
                5.0,
                "min",
            )
        )
    if "transformers Qwen2-VL rotary + apply" in med:
        checks.append(
            (
                "apply_rope 3-axis vs transformers Qwen2-VL rotary path",
                med["transformers Qwen2-VL rotary + apply"]
                / med["fastpe.apply_rope(q, k) Qwen2-VL 3-axis"],
                10.0,
                "min" if full else "info",
            )
        )
    return [
        (what, v, bound, kind, v <= bound if kind.endswith("max") else v >= bound)
        for what, v, bound, kind in checks
    ]


# --------------------------------------------------------------------------- busy machine

# A process that keeps one core busy until it is killed: the background load of
# the busy column (niceness set by the child itself, so no pre-exec hook runs
# in this possibly threaded process; Windows has no niceness: a priority class).
_SPIN = (
    "import os, sys\nif hasattr(os, 'nice'):\n    os.nice(int(sys.argv[1]))\n"
    "while True:\n    pass\n"
)


def _priority_class(nice: int) -> int:
    """Windows' creation flag nearest to a niceness (0 elsewhere: the child sets it)."""
    if sys.platform != "win32" or nice <= 0:
        return 0
    return subprocess.IDLE_PRIORITY_CLASS if nice >= 10 else subprocess.BELOW_NORMAL_PRIORITY_CLASS


BUSY_STATES = [("idle", None), ("busy nice 19", 19), ("busy nice 0", 0)]


class Spinners:
    """``count`` busy-looping processes at niceness ``nice`` while the block runs
    (none for ``nice=None``).  They are killed and reaped on the way out, on
    errors and KeyboardInterrupt too."""

    def __init__(self, nice: int | None, count: int, settle: float = 0.3) -> None:
        self.nice, self.count, self.settle = nice, count, settle
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Spinners:
        if self.nice is not None:
            for _ in range(self.count):
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", _SPIN, str(self.nice)],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        creationflags=_priority_class(self.nice),
                    )
                )
        # the spinners start, and a default team has seen them (or their end)
        time.sleep(self.settle)
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []


def busy_calls(quick: bool = False) -> dict[str, Callable[[int | None], object]]:
    """One call of each kind, given its num_threads: a table into out=, add_to,
    apply_rope on q and k (positions before heads) and rope_cache."""
    rng = np.random.default_rng(0)
    S, D = (1024, 512) if quick else (4096, 1024)
    out = np.empty((S, D), np.float32)
    x = rng.standard_normal((2, 1024, 512) if quick else (8, 2048, 1024), dtype=np.float32)
    qshape = (1, 1024, 8, 128) if quick else (1, 4096, 32, 128)
    q = rng.standard_normal(qshape, dtype=np.float32)
    k = rng.standard_normal(qshape, dtype=np.float32)
    cache_len = 4096 if quick else 16384
    return {
        f"table {S}x{D} float32 out=": lambda nt: _api.sinusoidal(S, D, out=out, num_threads=nt),
        f"add_to {'x'.join(map(str, x.shape))} float32": lambda nt: _api.add_to(x, num_threads=nt),
        f"apply_rope q, k {'x'.join(map(str, qshape))}": lambda nt: _rope_apply.apply_rope(
            q, k, seq_axis=1, num_threads=nt
        ),
        f"rope_cache 128 x {cache_len}": lambda nt: _rope_cache.rope_cache(
            128, seq_len=cache_len, num_threads=nt
        ),
    }


def _one_vs_default(fn: Callable[[int | None], object], rounds: int, n: int) -> dict:
    """Times of ``rounds * n`` calls on one thread and as many with the default
    team, alternated call by call (the machine's own load drifts; both see the
    same): the median and the maximum of each."""
    times: dict[str, list[float]] = {"1": [], "default": []}
    fn(1)
    fn(None)
    for _ in range(rounds * n):
        for key, nt in (("1", 1), ("default", None)):
            t0 = time.perf_counter()
            fn(nt)
            times[key].append(time.perf_counter() - t0)
    return {
        key: {"median_s": float(np.median(v)), "max_s": float(np.max(v))}
        for key, v in times.items()
    }


def busy_spinner_count() -> int:
    """One background process per two usable cores (at least one)."""
    return max(1, _api.build_info()["usable_cpus"] // 2)


def measure_busy(*, quick: bool = False) -> dict:
    """Each kind of call on one thread and with the default team, on this
    machine as it is ("idle") and beside one busy-looping process per two cores
    at ``nice 19`` and, separately, at ``nice 0``; the benchmark starts and
    stops those processes itself.  Medians and maxima: a team thread the
    scheduler has not run yet stalls a call for a scheduler slice."""
    rounds, n = (2, 3) if quick else (3, 10)
    calls = busy_calls(quick)
    count = busy_spinner_count()
    out: dict = {"spinners": count, "quick": quick, "states": {}}
    for state, nice in BUSY_STATES:
        with Spinners(nice, count):
            out["states"][state] = {
                name: _one_vs_default(fn, rounds, n) for name, fn in calls.items()
            }
    return out


def busy_targets(busy: dict) -> list[tuple[str, float, float, str, bool]]:
    """Busy states: the default call's median over the one-thread call's, at
    most 1.25 (the full shapes; "info-max" for --quick).  Idle: the speed-up."""
    checks = []
    for state, calls in busy["states"].items():
        for name, r in calls.items():
            ratio = r["default"]["median_s"] / r["1"]["median_s"]
            if state == "idle":
                checks.append((f"{name}: idle speed-up", 1 / ratio, 1.0, "info"))
            else:
                kind = "info-max" if busy["quick"] else "max"
                checks.append((f"{name}: {state}, default / 1 thread", ratio, 1.25, kind))
    return [
        (what, v, bound, kind, v <= bound if kind.endswith("max") else v >= bound)
        for what, v, bound, kind in checks
    ]


def format_busy(busy: dict) -> list[str]:
    lines = [
        "",
        f"Busy machine ({busy['spinners']} background busy loop(s) per state; ms, median / max):",
    ]
    hdr = f"  {'call':<36} {'state':<13} {'1 thread':>16} {'default':>16} {'ratio':>6}"
    lines.append(hdr)
    for state, calls in busy["states"].items():
        for name, r in calls.items():
            one, dflt = r["1"], r["default"]
            lines.append(
                f"  {name:<36} {state:<13} "
                f"{one['median_s'] * 1e3:>7.2f} / {one['max_s'] * 1e3:>6.1f} "
                f"{dflt['median_s'] * 1e3:>7.2f} / {dflt['max_s'] * 1e3:>6.1f} "
                f"{dflt['median_s'] / one['median_s']:>6.2f}"
            )
    return lines


# --------------------------------------------------------------------------- small calls


def numpy_rows_f32(positions: np.ndarray, d_model: int) -> np.ndarray:
    """The NumPy float32 formula for a few rows at explicit positions."""
    pos = np.asarray(positions, dtype=np.float32)[:, np.newaxis]
    div_term = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-(np.log(10000.0) / d_model))
    )
    out = np.empty((pos.shape[0], d_model), dtype=np.float32)
    angle = pos * div_term
    out[:, 0::2] = np.sin(angle)
    out[:, 1::2] = np.cos(angle)
    return out


def diffusers_numpy_f32(
    timesteps: np.ndarray, dim: int, max_period: float = 10000.0, downscale_freq_shift: float = 1.0
) -> np.ndarray:
    """diffusers' ``get_timestep_embedding`` (defaults), transcribed to NumPy float32."""
    half = dim // 2
    exponent = -math.log(max_period) * np.arange(half, dtype=np.float32)
    exponent = exponent / np.float32(half - downscale_freq_shift)
    emb = timesteps.astype(np.float32)[:, None] * np.exp(exponent)[None, :]
    return np.concatenate([np.sin(emb), np.cos(emb)], axis=-1)


def _numba_row() -> Callable[[np.ndarray, float], None] | None:
    """numba's parallel loop for one row (when numba is installed)."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(parallel=True, fastmath=False, cache=False)
    def fill(row, k):  # pragma: no cover - compiled
        d = row.shape[1]
        for i in numba.prange(d // 2):
            w = 10000.0 ** (-2.0 * i / d)
            row[0, 2 * i] = math.sin(k * w)
            row[0, 2 * i + 1] = math.cos(k * w)

    return fill


def _interleaved_medians(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median time per call of each function, microsecond calls measured side by
    side: every round times a batch of calls of each function in turn (so slow
    phases of a shared machine hit all of them), the median over rounds."""
    batch = {}
    for name, fn in fns.items():  # warm up, and size a batch to ~0.2 ms
        fn()
        t0 = time.perf_counter()
        fn()
        batch[name] = max(1, min(2000, int(2e-4 / max(time.perf_counter() - t0, 1e-7))))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            n = batch[name]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times[name].append((time.perf_counter() - t0) / n)
    return {name: float(np.median(t)) for name, t in times.items()}


def measure_small(*, quick: bool = False) -> dict:
    """The calls users make per step (one row, a batch of timesteps, one token),
    fastpe next to the NumPy formulas, from one run of interleaved batches."""
    row = np.empty((1, 512), np.float32)

    def steps(delta):
        # offset k, k+delta, ...: a decoding loop (delta=1), or the same offset
        # (delta=0) through the same Python code, so the two differ only in fastpe
        step = [1000]

        def call():
            step[0] = step[0] + delta if step[0] < 5000 else 1000
            _api.sinusoidal(1, 512, offset=step[0], out=row)

        return call

    far = [1000]

    def new_block_row():  # every call in another block: no anchor to reuse
        far[0] = far[0] + 128 if far[0] < 10**6 else 1000
        _api.sinusoidal(1, 512, offset=far[0], out=row)

    # The same row in 32 places within a page, in turn: where the output lies
    # relative to the library's working memory changed a one-row call's time by
    # up to 2x in some builds, so a row kept in one place can flatter or penalise
    # a build (docs/performance.md, "Where the row lies").
    page = np.empty(3 * 4096, np.uint8)
    first = (-page.ctypes.data) % 4096
    places = [
        page[first + 128 * i : first + 128 * i + 2048].view(np.float32).reshape(1, 512)
        for i in range(32)
    ]
    turn = [0]

    def placed_row():
        turn[0] = (turn[0] + 1) % 32
        _api.sinusoidal(1, 512, offset=1000, out=places[turn[0]])

    timesteps = np.array([999.5, 949.25, 899.0, 848.75, 798.5, 748.25, 698.0, 647.75])
    x = np.zeros((1, 1, 4096), np.float32)
    pe_pos = np.array([1000])

    def numpy_add_token():
        x[0] += numpy_rows_f32(pe_pos, 4096)

    tok = [1000]

    def add_token_steps():  # one token per step at offsets k, k+1, ...
        tok[0] = tok[0] + 1 if tok[0] < 5000 else 1000
        _api.add_to(x, offset=tok[0])

    def add_token_new_block():
        tok[0] = tok[0] + 32 if tok[0] < 10**6 else 1000
        _api.add_to(x, offset=tok[0])

    fns: dict[str, Callable[[], object]] = {
        "fastpe sinusoidal(1, 512, offset=1000, out=row)": lambda: _api.sinusoidal(
            1, 512, offset=1000, out=row
        ),
        "fastpe sinusoidal(1, 512, offset=1000)": lambda: _api.sinusoidal(1, 512, offset=1000),
        "fastpe one row out=, 32 places in a page in turn": placed_row,
        "fastpe decoding steps (offset k, k+1, ...)": steps(1),
        "fastpe same offset, through the same code": steps(0),
        "fastpe one row, another block each call": new_block_row,
        "NumPy f32 formula, one row": lambda: numpy_rows_f32(pe_pos, 512),
        "fastpe sinusoidal(64, 512)": lambda: _api.sinusoidal(64, 512),
        "NumPy f32 formula, 64x512": lambda: numpy_f32(64, 512),
        "fastpe sinusoidal_at(8 timesteps, 320, diffusers)": lambda: _api.sinusoidal_at(
            timesteps, 320, convention="diffusers"
        ),
        "NumPy f32 diffusers get_timestep_embedding": lambda: diffusers_numpy_f32(timesteps, 320),
        "fastpe add_to((1, 1, 4096), offset=1000)": lambda: _api.add_to(x, offset=1000),
        "fastpe add_to one token, offsets k, k+1, ...": add_token_steps,
        "fastpe add_to one token, another block each call": add_token_new_block,
        "NumPy f32 x += row formula (1, 1, 4096)": numpy_add_token,
    }
    numba_fill = _numba_row()
    if numba_fill is not None:
        fns["numba parallel loop, one row"] = lambda: numba_fill(row, 1000.0)
    med = _interleaved_medians(fns, 11 if quick else 41)
    return {"median_s": med}


SMALL_TARGETS = [
    # (what, numerator, denominator or None, bound, kind): value = num [/ den]
    ("one row out= (us)", "fastpe sinusoidal(1, 512, offset=1000, out=row)", None, 2.0, "max"),
    (
        "one row out= vs NumPy row formula",
        "NumPy f32 formula, one row",
        "fastpe sinusoidal(1, 512, offset=1000, out=row)",
        3.0,
        "min",
    ),
    ("one row, new array (us)", "fastpe sinusoidal(1, 512, offset=1000)", None, 2.5, "max"),
    (
        "decoding steps / same-offset row",
        "fastpe decoding steps (offset k, k+1, ...)",
        "fastpe same offset, through the same code",
        1.1,
        "max",
    ),
    ("64x512 new array (us)", "fastpe sinusoidal(64, 512)", None, 6.0, "max"),
    (
        "8 diffusers timesteps at 320 (us)",
        "fastpe sinusoidal_at(8 timesteps, 320, diffusers)",
        None,
        8.0,
        "max",
    ),
    (
        "8 diffusers timesteps vs NumPy f32",
        "NumPy f32 diffusers get_timestep_embedding",
        "fastpe sinusoidal_at(8 timesteps, 320, diffusers)",
        5.0,
        "min",
    ),
    (
        "add_to one token (1, 1, 4096) (us)",
        "fastpe add_to((1, 1, 4096), offset=1000)",
        None,
        3.0,
        "max",
    ),
    (
        "add_to one token, offsets k, k+1, ... (us)",
        "fastpe add_to one token, offsets k, k+1, ...",
        None,
        3.0,
        "max",
    ),
    (
        "add_to one token, another block each call (us)",
        "fastpe add_to one token, another block each call",
        None,
        3.0,
        "info-max",
    ),
    (
        "one row, another block each call (us)",
        "fastpe one row, another block each call",
        None,
        2.0,
        "info-max",
    ),
]


def small_targets(small: dict) -> list[tuple[str, float, float, str, bool]]:
    med = small["median_s"]
    out = []
    for what, num, den, bound, kind in SMALL_TARGETS:
        v = med[num] / med[den] if den else med[num] * 1e6
        out.append((what, v, bound, kind, v <= bound if kind.endswith("max") else v >= bound))
    return out


def targets(result: dict) -> list[tuple[str, float, float, str, bool]]:
    """The speed targets for big tables and the fused add, evaluated on one run for
    the sizes they name: (what, measured, bound, "min"/"max"/"info", ok)."""
    checks = []
    for r in result["results"]:
        m = r["methods"]
        S, D, dt = r["seq_len"], r["d_model"], r["dtype"]
        if (S, D) not in FULL_SIZES:
            continue
        t, t_out = m[FASTPE]["median_s"], m[FASTPE_OUT]["median_s"]
        tag = f"{S}x{D} {dt}"
        checks.append(
            (
                f"{tag}: out= / out.fill()",
                t_out / m["out.fill() [memory limit]"]["median_s"],
                2.0,
                "max",
            )
        )
        checks.append(
            (f"{tag}: new / np.empty().fill()", t / m["np.empty().fill()"]["median_s"], 2.0, "max")
        )
        # The speed-up targets are read on a buffer already touched (out=): a new
        # array pays the OS's page zeroing too, which np.empty().fill() shows is
        # itself several times the write time for tables beyond the caches; the
        # new-array speed-up is printed beside it ("info").
        peer = "NumPy seed formula f64" if dt == "float64" else "NumPy formula f32"
        short = "NumPy seed f64" if dt == "float64" else "NumPy f32"
        bound = 10.0 if (S, D) == (512, 512) else (50.0 if dt == "float64" else 15.0)
        if (S, D) != (512, 512) or dt == "float32":
            checks.append(
                (f"{tag}: speed-up vs {short} (out=)", m[peer]["median_s"] / t_out, bound, "min")
            )
            checks.append(
                (f"{tag}: speed-up vs {short} (new array)", m[peer]["median_s"] / t, bound, "info")
            )
    if result.get("add_to") and result["add_to"]["shape"] == [32, 2048, 1024]:
        a = result["add_to"]["median_s"]
        tag = "x".join(str(v) for v in result["add_to"]["shape"])
        best_np = min(a["NumPy x*=s; x+=table"], a["NumPy x*=s; x+=table[positions]"])
        checks.append((f"add_to {tag}: vs best NumPy", best_np / a["fastpe.add_to"], 2.0, "min"))
        checks.append(
            (
                f"add_to {tag}: positions= vs NumPy gather",
                a["NumPy x*=s; x+=table[positions]"] / a["fastpe.add_to positions="],
                2.0,
                "min",
            )
        )
        if ADD_LIMIT in a:
            checks.append(
                (
                    f"add_to {tag}: add_to(x) / np.add(x, table)",
                    a["fastpe.add_to(x) [scale 1]"] / a[ADD_LIMIT],
                    1.2,
                    "max",
                )
            )
    return [
        (what, v, bound, kind, (v >= bound) if kind in ("min", "info") else (v <= bound))
        for what, v, bound, kind in checks
    ]


def all_targets(result: dict) -> list[tuple[str, float, float, str, bool]]:
    return (
        targets(result)
        + (small_targets(result["small"]) if result.get("small") else [])
        + (rope_targets(result["rope"]) if result.get("rope") else [])
        + (busy_targets(result["busy"]) if result.get("busy") else [])
    )


def format_table(result: dict) -> str:
    lines = []
    mach = result["machine"]
    info = result["build_info"]
    lines.append(
        f"fastpe {info['version']}  OpenMP={info['openmp']}  threads={info['max_threads']}  "
        f"{mach['cpu_count']} CPUs  {mach['platform']}  Python {mach['python']}"
    )
    lines.append("")
    hdr = (
        f"{'size':<11} {'dtype':<7} {'method':<28} {'median ms':>10} {'ns/elem':>8} "
        f"{'fastpe x':>9} {'max |err|':>10}"
    )
    lines.append(hdr)
    lines.append("-" * len(hdr))
    for r in result["results"]:
        m = r["methods"]
        tf = m[FASTPE]["median_s"]
        for name, e in m.items():
            ratio = e["median_s"] / tf
            err = "" if e["max_abs_error"] is None else f"{e['max_abs_error']:.1e}"
            lines.append(
                f"{r['seq_len']}x{r['d_model']:<{11 - len(str(r['seq_len'])) - 1}} "
                f"{r['dtype']:<7} {name:<28} {e['median_s'] * 1e3:>10.3f} "
                f"{e['ns_per_element']:>8.3f} {ratio:>8.1f}x {err:>10}"
            )
        lines.append("")
    lines.append(
        "'fastpe x' = method's median time / fastpe's (new array, all threads): "
        "how many times slower than fastpe."
    )
    if result.get("add_to"):
        a = result["add_to"]
        lines.append("")
        lines.append(f"Fused add, x of shape {tuple(a['shape'])} {a['dtype']}, x = x*0.5 + PE:")
        t0 = a["median_s"]["fastpe.add_to"]
        for name, t in a["median_s"].items():
            lines.append(f"  {name:<34} {t * 1e3:>9.2f} ms  {t / t0:>6.2f}x")
    if result.get("small"):
        med = result["small"]["median_s"]
        lines.append("")
        lines.append("Small calls (medians of interleaved batches, microseconds per call):")
        for name, t in med.items():
            lines.append(f"  {name:<52} {t * 1e6:>9.2f} us")
    if result.get("rope"):
        r = result["rope"]
        lines.append("")
        lines.append(f"RoPE, q and k of shape {tuple(r['shape'])} {r['dtype']}, rotated in place:")
        for name, t in r["median_s"].items():
            unit = (t * 1e6, "us") if name == "fastpe decoding step" else (t * 1e3, "ms")
            lines.append(f"  {name:<52} {unit[0]:>9.2f} {unit[1]}")
    if result.get("busy"):
        lines.extend(format_busy(result["busy"]))
    lines.extend(format_summary(result))
    return "\n".join(lines)


def format_summary(result: dict) -> list[str]:
    """The short result: speed ratios as measured here, errors, correctness checks."""
    lines = ["", "Summary of this run on this machine (speed depends on the machine and its load;"]
    lines.append("a quiet reference machine's figures: docs/performance.md):")
    hdr = (
        f"  {'size':<11} {'dtype':<7} {'x NumPy (new)':>13} {'x NumPy (out=)':>14} "
        f"{'fastpe |err|':>12} {'NumPy |err|':>11}"
    )
    lines.append(hdr)
    for r in result["results"]:
        m = r["methods"]
        peer = m.get("NumPy seed formula f64") or m.get("NumPy formula f32")
        if peer is None:
            continue

        def err(e: dict) -> str:
            return "" if e["max_abs_error"] is None else f"{e['max_abs_error']:.1e}"

        lines.append(
            f"  {r['seq_len']}x{r['d_model']:<{10 - len(str(r['seq_len']))}} {r['dtype']:<7} "
            f"{peer['median_s'] / m[FASTPE]['median_s']:>12.1f}x "
            f"{peer['median_s'] / m[FASTPE_OUT]['median_s']:>13.1f}x "
            f"{err(m[FASTPE]):>12} {err(peer):>11}"
        )
    # (the big tables' speed-ups against NumPy are the columns above)
    ratios = [c for c in all_targets(result) if "speed-up vs" not in c[0]]
    if ratios:
        lines.append("")
        lines.append("Other ratios and times from this run:")
        width = max(len(c[0]) for c in ratios)
        for what, v, *_ in ratios:
            lines.append(f"  {what:<{width}} {v:9.2f}")
    checks = all_checks(result)
    lines.append("")
    lines.append("Correctness (a wrong result makes `fastpe bench` exit 1):")
    for c in checks:
        lines.append(f"  {'ok' if c['ok'] else 'WRONG':<5}  {c['what']}: {c['detail']}")
    if not checks:
        lines.append("  (nothing checked in this run)")
    return lines


CHART_MISSING = "fastpe bench: --chart needs matplotlib: pip install 'fastpe[plot]'"


def chart(result: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = result["results"]
    fig, axes = plt.subplots(1, len(res), figsize=(4 * len(res), 4.5), squeeze=False)
    for ax, r in zip(axes[0], res, strict=False):
        names = list(r["methods"])
        vals = [r["methods"][n]["ns_per_element"] for n in names]
        colors = ["tab:blue" if n.startswith("fastpe") else "tab:gray" for n in names]
        ax.barh(names, vals, color=colors)
        ax.set_xscale("log")
        ax.set_title(f"{r['seq_len']}x{r['d_model']} {r['dtype']}", fontsize=9)
        ax.set_xlabel("ns per element (log)")
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- CLI glue


# The on/off switches of `fastpe bench`: (flag, help).
_SWITCHES = (
    ("--quick", "fewer sizes and repeats (~10 s)"),
    ("--json", "print the results as JSON"),
    ("--no-progress", "no progress bar on stderr"),
    ("--no-accuracy", "skip the mpmath error column"),
    ("--no-add-to", "skip the fused-add comparison"),
    ("--no-small", "skip the small calls (one row, a few timesteps, one token)"),
    ("--no-rope", "skip RoPE (apply_rope on q and k, one step)"),
    ("--no-busy", "skip the busy-machine column (calls beside background busy loops)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for flag, text in _SWITCHES:
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument(
        "--chart", metavar="FILE.png", help="also save a bar chart (needs matplotlib)"
    )
    parser.add_argument(
        "--size",
        metavar="SxD",
        action="append",
        help="table size, e.g. 4096x1024 (repeatable; default: the standard set)",
    )


def run(args: argparse.Namespace) -> int:
    if args.size:
        try:
            parsed = [tuple(int(v) for v in s.lower().split("x")) for s in args.size]
            if any(len(s) != 2 or min(s) < 1 for s in parsed):
                raise ValueError
            sizes = [(s[0], s[1]) for s in parsed]
        except ValueError:
            print(
                f"fastpe bench: --size must look like 4096x1024, got {args.size}", file=sys.stderr
            )
            return 2
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.chart:
        # Checked before the benchmark, which takes minutes, rather than after it.
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(CHART_MISSING, file=sys.stderr)
            return 1
        chart_dir = os.path.dirname(os.path.realpath(args.chart))
        if not (os.path.isdir(chart_dir) and os.access(chart_dir, os.W_OK)):
            print(
                f"fastpe bench: --chart: cannot write {args.chart!r}: the directory "
                f"{chart_dir!r} does not exist or is not writable",
                file=sys.stderr,
            )
            return 1
    accuracy = not args.no_accuracy
    if accuracy:
        try:
            import mpmath  # noqa: F401
        except ImportError:
            print(
                "fastpe bench: mpmath not installed; skipping the accuracy column", file=sys.stderr
            )
            accuracy = False
    show_progress = not args.no_progress and sys.stderr.isatty()
    result = measure(sizes, quick=args.quick, progress=show_progress, accuracy=accuracy)
    if not args.no_add_to:
        result["add_to"] = measure_add_to(
            (8, 2048, 1024) if args.quick else (32, 2048, 1024), quick=args.quick
        )
    if not args.no_small:
        result["small"] = measure_small(quick=args.quick)
    if not args.no_rope:
        result["rope"] = measure_rope(quick=args.quick)
    if not args.no_busy:
        result["busy"] = measure_busy(quick=args.quick)
    if args.json:
        result["ratios"] = [dict(what=w, value=v) for w, v, *_ in all_targets(result)]
        print(json.dumps(result, indent=2))
    else:
        print(format_table(result))
    wrong = [c for c in all_checks(result) if not c["ok"]]
    for c in wrong:
        print(f"fastpe bench: wrong result: {c['what']}: {c['detail']}", file=sys.stderr)
    if args.chart:
        try:
            chart(result, args.chart)
        except ImportError:
            print(CHART_MISSING, file=sys.stderr)
            return 1
    return 1 if wrong else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fastpe bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
