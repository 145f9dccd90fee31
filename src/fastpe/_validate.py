"""Argument checking shared by every public function (one place, one style).

Messages name the argument and the offending value, in NumPy's manner:
``seq_len must be a non-negative integer, got -1``.
"""

from __future__ import annotations

import math
import numbers
import operator
import sys
from typing import Any, TypeVar, cast

import numpy as np

from . import kernel as _kernel
from ._system import memory_limit, physical_memory  # noqa: F401  (re-export)

LAYOUTS = ("interleaved", "split")

_LAYOUT_CODES = {"interleaved": 0, "split": 1}
FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
SUPPORTED = "float16, bfloat16, float32 or float64"

# bfloat16 arrays are ml_dtypes' type (an optional extra).  Without it, a
# bfloat16 buffer from elsewhere (a PyTorch tensor) is handled as its uint16
# bits, marked with this dtype (the kernel sees uint16 in either case).
BF16_BITS = np.dtype(np.uint16, metadata={"fastpe": "bfloat16"})
BF16_EXTRA = (
    "bfloat16 arrays need the ml_dtypes package: pip install 'fastpe[bfloat16]' "
    "(or pip install ml_dtypes)"
)


def bfloat16_dtype() -> np.dtype:
    """ml_dtypes' bfloat16 as a NumPy dtype; ImportError naming the extra without it."""
    try:
        import ml_dtypes  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise ImportError(BF16_EXTRA) from None
    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dt: np.dtype) -> bool:
    return (dt.kind == "V" and dt.name == "bfloat16" and dt.itemsize == 2 and dt.isnative) or (
        dt == BF16_BITS and dict(dt.metadata or {}).get("fastpe") == "bfloat16"
    )


def is_output_dtype(dt: np.dtype) -> bool:
    """float16/32/64 in native byte order, or bfloat16."""
    if is_bfloat16(dt):
        return True
    # Where long double is a double (Windows, some Arm ABIs) NumPy's longdouble
    # compares equal to float64, but it is a type of its own that the kernel's
    # buffers refuse: it is refused here, with the other unsupported dtypes.
    return dt.isnative and dt.char != "g" and dt in (np.dtype(np.float16), *FLOAT_DTYPES)


def dtype_name(dt: np.dtype) -> str:
    """``dt`` as messages name it: NumPy names a 64-bit long double "float64",
    which in a refusal would read as the supported float64."""
    if dt.char == "g":
        if dt.itemsize == 8:
            return "longdouble (64-bit here, but not float64: convert it to float64)"
        return f"longdouble ({dt})"
    return str(dt)


def kernel_view(arr: np.ndarray) -> tuple[np.ndarray, bool]:
    """(a view the kernel can fill, whether it holds bfloat16): NumPy exports no
    buffer of ml_dtypes' types, so bfloat16 goes to the kernel as uint16 bits."""
    if is_bfloat16(arr.dtype):
        return arr.view(np.uint16), True
    return arr, False


# The kernel takes int64 sizes; anything larger is refused here, with the
# argument's name, instead of surfacing as an OverflowError from Cython.
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# A knob that multiplies the frequencies (position_scale, tensor2tensor's
# min_timescale) sets the largest one, which the kernel splits (Veltkamp: 2**27 * f)
# and multiplies by positions: 1e280 leaves room for both.  ``base`` itself has no
# bound: its log is taken on the mantissa and the exponent separately, and the
# frequencies it gives are at most position_scale (base > 1) or are checked by the
# kernel (base < 1).
MAX_SCALE = 1e280


def as_int(
    value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """An integer argument: Python or NumPy integers only (not bool, not float)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        ivalue = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}"
        ) from None
    if minimum is not None and ivalue < minimum:
        if minimum == 0:
            raise ValueError(f"{name} must be a non-negative integer, got {ivalue}")
        raise ValueError(f"{name} must be an integer >= {minimum}, got {ivalue}")
    if maximum is not None and ivalue > maximum:
        raise ValueError(f"{name} must be an integer <= {maximum}, got {ivalue}")
    return ivalue


def as_real(value: Any, name: str) -> float:
    """A real number (not bool) as a float; inf when it is beyond the float range."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    try:
        return float(value)
    except OverflowError:  # a Python int or Fraction beyond the float range
        return math.inf


def as_base(value: Any, name: str = "base", *, maximum: float | None = None) -> float:
    """A finite, strictly positive real number (at most ``maximum``)."""
    fvalue = as_real(value, name)
    if not math.isfinite(fvalue) or fvalue <= 0.0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    if maximum is not None and fvalue > maximum:
        raise ValueError(f"{name} must be <= {maximum:g}, got {value!r}")
    return fvalue


def as_finite(value: Any, name: str) -> float:
    """A finite real number of any sign (not bool)."""
    fvalue = as_real(value, name)
    if not math.isfinite(fvalue):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return fvalue


def as_bool(value: Any, name: str) -> bool:
    """A flag: True/False (or a NumPy bool) only -- a string such as "no" is truthy,
    so anything else is refused rather than guessed at."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


_Choice = TypeVar("_Choice", bound=str)


def as_choice(value: Any, name: str, choices: tuple[_Choice, ...]) -> _Choice:
    # generic so that a Literal-typed parameter keeps its type through the check
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {choices}, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return cast(_Choice, value)


def as_layout(value: Any) -> int:
    if not isinstance(value, str):
        raise TypeError(f"layout must be a string, one of {LAYOUTS}, got {type(value).__name__}")
    try:
        return _LAYOUT_CODES[value]
    except KeyError:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {value!r}") from None


def as_float_dtype(value: Any, *, bits_ok: bool = False) -> np.dtype:
    """An output dtype: float16, bfloat16, float32 or float64.  "bfloat16" needs
    ml_dtypes (ImportError naming the extra), unless ``bits_ok``: then, without
    it, BF16_BITS stands for bfloat16 (a caller's ``out`` will say what it is)."""
    if isinstance(value, str) and value == "bfloat16":
        try:
            return bfloat16_dtype()
        except ImportError:
            if bits_ok:
                return BF16_BITS
            raise
    try:
        dt = np.dtype(value)
    except Exception:  # np.dtype's parser also raises SyntaxError, KeyError, ...
        raise TypeError(f"dtype must be {SUPPORTED}, got {value!r}") from None
    if not is_output_dtype(dt):
        raise TypeError(f"dtype must be {SUPPORTED} (native byte order), got {dtype_name(dt)}")
    return dt if is_bfloat16(dt) else dt.newbyteorder("=")


def as_num_threads(value: Any) -> int:
    """None -> 0 (the OpenMP default: OMP_NUM_THREADS / threadpoolctl); else an int >= 1.
    The kernel caps it at the OpenMP thread limit, so huge values are capped here
    to what a C int holds (same result, no OverflowError)."""
    if value is None:
        return 0
    return min(as_int(value, "num_threads", minimum=1), 2**31 - 1)


def check_table_size(
    seq_len: int, d_model: int, itemsize: int, *, working_copies: int = 1, scratch: int = 0
) -> None:
    """Refuse tables that cannot exist *before* anything is allocated: byte sizes
    beyond the address space (ValueError; NumPy's message is less useful) and
    requests larger than the memory this process may use -- the machine's RAM, a
    cgroup memory limit, ``ulimit -v`` (MemoryError; with memory overcommit the
    allocation could succeed and the process be OOM-killed half way).
    ``working_copies``: table-sized arrays the computation holds at once;
    ``scratch``: bytes of working memory the kernel allocates beside them."""
    nbytes = seq_len * d_model * itemsize * working_copies
    if max(seq_len, 1) * max(d_model, 1) * itemsize > sys.maxsize:
        raise ValueError(
            f"a ({seq_len}, {d_model}) table of {itemsize}-byte floats does not fit in memory"
        )
    total = nbytes + scratch
    if total < _kernel.SMALL_REQUEST:
        return
    limit = memory_limit()
    if limit is not None and total > limit[0]:
        what = "working memory" if working_copies > 1 or scratch else "memory"
        raise MemoryError(
            f"a ({seq_len}, {d_model}) table of {itemsize}-byte floats needs "
            f"{total / 2**30:.1f} GiB of {what}, more than "
            f"{limit[1]} ({limit[0] / 2**30:.1f} GiB)"
        )


def as_out_array(out: Any) -> np.ndarray:
    """An ndarray viewing the memory of the caller's ``out``, never a copy.

    Accepted: an ndarray (returned as is); an object with the buffer protocol or
    ``__array_interface__``/``__array_struct__`` (``memoryview``, ``array.array``,
    ...); a ``__dlpack__`` producer in CPU memory (a PyTorch CPU tensor, ...).
    Objects that offer only ``__array__`` are refused: that method may return a
    copy, and filling a copy would silently leave ``out`` unchanged.
    """
    if isinstance(out, np.ndarray):
        if isinstance(out, np.ma.MaskedArray):
            raise TypeError(
                "out must not be a masked array (the mask would be ignored and "
                "overwritten entries stay masked); pass out.data"
            )
        return out
    arr = None
    if hasattr(out, "__array_interface__") or hasattr(out, "__array_struct__"):
        arr = np.asarray(out)
    else:
        try:
            view = memoryview(out)
        except TypeError:
            view = None
        if view is not None:
            arr = np.asarray(view)
        elif hasattr(out, "__dlpack__") and not _is_torch_bfloat16(out):
            arr = _from_dlpack(out, out)
    if arr is None and hasattr(out, "__dlpack__"):
        arr = _bfloat16_tensor(out)
    if arr is None:
        raise TypeError(
            "out must be a numpy.ndarray or an array NumPy can view without a copy "
            "(buffer protocol, __array_interface__, __dlpack__), "
            f"got {type(out).__name__}"
        )
    # A view of foreign memory never owns its data; an array that does is a copy
    # (e.g. made by a conversion method), and filling it would not fill `out`.
    # An empty one has nothing to fill (NumPy gives empty DLPack imports their own data).
    if arr.flags.owndata and arr.size:
        raise TypeError(
            f"out ({type(out).__name__}) could only be converted to an array by copying"
        )
    return arr


def _from_dlpack(producer: Any, out: Any) -> np.ndarray:
    """A writable NumPy view of a DLPack producer's memory (``out``: the caller's
    object, named in the errors)."""
    try:
        arr = np.from_dlpack(producer)
    except (BufferError, RuntimeError, TypeError, ValueError) as exc:
        raise TypeError(
            f"out ({type(out).__name__}) could not be viewed by NumPy through DLPack "
            f"without a copy: {exc}"
        ) from None
    if not arr.flags.writeable:
        raise ValueError(
            f"out ({type(out).__name__}) is read-only once viewed through DLPack: the "
            "producer marked it read-only, or it speaks only the legacy (unversioned) "
            f"DLPack, or NumPy {np.__version__} is older than 2.2.5 and imports every "
            "DLPack tensor read-only; pass a writable NumPy view instead (for a "
            "PyTorch CPU tensor: out=tensor.numpy(), also zero-copy)"
        )
    return arr


def _is_torch_bfloat16(t: Any) -> bool:
    return (
        type(t).__module__.startswith("torch") and str(getattr(t, "dtype", "")) == "torch.bfloat16"
    )


def _bfloat16_tensor(t: Any) -> np.ndarray | None:
    """A PyTorch bfloat16 tensor in CPU memory as an ndarray of its bits (DLPack
    has bfloat16, NumPy does not): the tensor's int16 view, zero-copy."""
    if not _is_torch_bfloat16(t):
        return None
    torch = sys.modules.get("torch")
    if torch is None or t.device.type != "cpu":
        raise TypeError(f"out ({type(t).__name__}) must be in CPU memory, got device {t.device}")
    arr = _from_dlpack(t.detach().view(torch.int16), t)
    try:
        return arr.view(bfloat16_dtype())
    except ImportError:
        return arr.view(BF16_BITS)


def writable_out(out: Any) -> np.ndarray:
    """A caller's output as a writable ndarray view (:func:`as_out_array`)."""
    out = as_out_array(out)
    if not out.flags.writeable:
        raise ValueError("out must be writable (got a read-only array)")
    return out


def check_out_dtype(out: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
    """``out`` (an ndarray view of a caller's output, see :func:`as_out_array`)
    after the checks only Python can make: dtype float16/bfloat16/float32/float64
    (native byte order), ``dtype`` when one was requested.  Its shape and layout
    are the library's to check (kernel.check_out), before this."""
    if not is_output_dtype(out.dtype):
        raise TypeError(
            f"out must have dtype {SUPPORTED} (native byte order), got {dtype_name(out.dtype)}"
        )
    if dtype is not None and is_bfloat16(dtype) and is_bfloat16(out.dtype):
        pass  # ml_dtypes' type, or the bits of a tensor's bfloat16 without it
    elif dtype is not None and out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype} but dtype={dtype} was requested")
    return out


def check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype | None) -> np.ndarray:
    """Validate a caller-supplied output array and return an ndarray view of it
    (``out`` itself for an ndarray; see :func:`as_out_array` for other objects).
    Accepted: exactly ``shape``, aligned, last axis contiguous, rows strided (a
    column slice of a wider matrix) but not running backwards, no two elements
    sharing memory on any axis (the library's pe_check_out); then the dtype
    (:func:`check_out_dtype`)."""
    out = writable_out(out)
    _kernel.check_out(kernel_view(out)[0], None, shape)
    check_out_dtype(out, dtype)
    # (a native dtype spelled explicitly, "<f8" as NumPy keeps it for ctypes buffers,
    # needs no conversion: the kernel accepts native byte-order prefixes)
    return out
