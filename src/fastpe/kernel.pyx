# cython: language_level=3
"""fastpe kernel: fills a caller's buffer with the sinusoidal table, in parallel.

The Python layer (``fastpe._api``) converts arguments and allocates; this
module fills a buffer it is handed through ONE checked call into the C library
(lib/: the argument checks, the fill driver, its plans and threads, linked
statically), and raises from the library's error detail.  In
parts by job:
  _pe_core.pxi   the C library's declarations (lib/src/pe_lib.h, lib/src/kernels/)
  _tuning.pxi    the library's tuning knobs and system probes, from Python
  _checks.pxi    the library's argument checks and error detail -> Python exceptions
  _buffers.pxi   from Python buffers to a fill, interruptible by Ctrl-C
  kernel.pyx     (this file) the Python entry points: Plan, Encoder, fill_rows
  _fast.pxi      the encoding cache and the fast paths table/table_at/add
  _rope_rotate.pxi  RoPE: the rotation of q/k rows in place, one pass
  _rope_axes.pxi    multi-axis RoPE: the RopeAxes handle, its tables and rotation
  _rope_plans.pxi   apply_rope / rope_cache arguments -> the library's plan cache
  _rope_fast.pxi    the fast paths of apply_rope and rope_cache over its plans
  _rope_native.pxi  the C library's multi-axis entry points, for the tests
  _rope_tables.pxi  RoPE rotations by the caller's angle tables (per head, mixed, xPos)
  _capi.pxi      the C API (include/fastpe.h, kernel.pxd) and its capsule
  _rope_presets.pxi  timm's rotary frequency rules and torch's float32 linspace
Results do not depend on the thread count (see lib/src/kernels/pe_core.h).
"""

from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, fabs, NAN
from libc.string cimport memcmp, memset
from cpython.buffer cimport (
    PyObject_GetBuffer, PyBuffer_Release, PyBUF_RECORDS, PyBUF_STRIDES, PyBUF_FORMAT,
)

from cpython.exc cimport PyErr_Occurred
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.buffer cimport PyBUF_WRITABLE, PyBUF_C_CONTIGUOUS
import functools
import threading


import numpy as _np

# Requests below this many bytes skip the memory-limit look-up (a small call
# stays cheap; a malloc that fails this small still raises MemoryError cleanly).
SMALL_REQUEST = 64 << 20

cdef object _NDARRAY = _np.ndarray
cdef object _np_empty = _np.empty
cdef object _F32 = _np.dtype(_np.float32)
cdef object _F64 = _np.dtype(_np.float64)
cdef object _F32_TYPE = _np.float32
cdef object _F64_TYPE = _np.float64
cdef double _small_request = SMALL_REQUEST


include "_pe_core.pxi"
include "_tuning.pxi"
include "_checks.pxi"
include "_buffers.pxi"


# ---------------------------------------------------------------------------
# Python entry points (private: the public API in fastpe._api validates first)
# ---------------------------------------------------------------------------

# the library's fastpe_strerror, for every code it returns (1 .. the highest)
ERROR_MESSAGES = {code: pe_strerror(code).decode() for code in range(1, PE_ELAST + 1)}


def _raise_for(int err):
    if err == FASTPE_ENOMEM:
        raise MemoryError(ERROR_MESSAGES[err])
    raise ValueError(ERROR_MESSAGES.get(err, f"fastpe kernel error {err}"))


# ---------------------------------------------------------------------------
# A convention -> the kernel's spec: made by the library (pe_spec_of), never here
# ---------------------------------------------------------------------------

cdef extern from "fastpe/fastpe.h" nogil:
    ctypedef struct fastpe_knobs:
        size_t size
        double base
        int denominator
        double shift
        double position_scale
        int columns
        int odd
        int has_padding_idx
        int64_t padding_idx
    int fastpe_spec_create(const fastpe_knobs *knobs, int64_t d_model, fastpe_spec **spec)
    int fastpe_knobs_preset(const char *name, fastpe_knobs *knobs)

cdef extern from "pe_lib.h" nogil:
    int pe_knobs_check(const fastpe_knobs *k)
    int pe_spec_of(const fastpe_knobs *k, int64_t d, pe_spec *sp)
    enum:
        PE_KNOB_DENOMINATOR
        PE_KNOB_LAYOUT
        PE_KNOB_ODD
        PE_KNOB_PRESET
    const char *pe_knob_name(int kind, int value)
    int pe_knob_parse(int kind, const char *s)


cdef tuple _knob_names(int kind):
    """The library's spellings of one kind of knob, in the order of its enum."""
    names = []
    while pe_knob_name(kind, len(names)) != NULL:
        names.append(pe_knob_name(kind, len(names)).decode())
    return tuple(names)


# The knobs' spellings (fastpe.Convention's fields), from the library's table
# (lib/src/spec.c), which also turns them into its enums (pe_knob_parse).
KNOB_SPELLINGS = {"denominator": _knob_names(PE_KNOB_DENOMINATOR),
                  "layout": _knob_names(PE_KNOB_LAYOUT), "odd": _knob_names(PE_KNOB_ODD)}
# fastpe_knobs_preset's names, in the library's order
PRESET_NAMES = _knob_names(PE_KNOB_PRESET)


def knobs_preset(str name):
    """The knobs of a named convention as the library presets them
    (fastpe_knobs_preset), as fastpe.Convention's keyword arguments."""
    cdef fastpe_knobs k
    if fastpe_knobs_preset(name.encode(), &k) != FASTPE_OK:
        raise ValueError(f"name must be one of {PRESET_NAMES}, got {name!r}")
    return {
        "base": k.base,
        "denominator": KNOB_SPELLINGS["denominator"][k.denominator],
        "shift": k.shift,
        "position_scale": k.position_scale,
        "layout": KNOB_SPELLINGS["layout"][k.columns],
        "odd": KNOB_SPELLINGS["odd"][k.odd],
        "padding_idx": k.padding_idx if k.has_padding_idx else None,
    }


cdef int _knob_code(int kind, str spelling) except -1:
    """The library's enum of a knob's spelling (the Convention checked it when it
    was built; one outside the table is a KeyError)."""
    cdef int code = pe_knob_parse(kind, spelling.encode())
    if code < 0:
        raise KeyError(spelling)
    return code


cdef int _knobs_init(fastpe_knobs *k, double base, double position_scale,
                     double shift) noexcept:
    memset(k, 0, sizeof(fastpe_knobs))
    k.size = sizeof(fastpe_knobs)
    k.base = base
    k.position_scale = position_scale
    k.shift = shift
    return 0


cdef int _knobs_of(conv, fastpe_knobs *k) except -1:
    """A fastpe.Convention's knobs as the library takes them (its fields were
    checked when it was built; a spelling outside the tables is a KeyError)."""
    if type(getattr(conv, "_key", None)) is not tuple:
        raise TypeError(f"convention must be a fastpe.Convention, got {type(conv).__name__}")
    _knobs_init(k, conv.base, conv.position_scale, conv.shift)
    k.denominator = _knob_code(PE_KNOB_DENOMINATOR, conv.denominator)
    k.columns = _knob_code(PE_KNOB_LAYOUT, conv.layout)
    k.odd = _knob_code(PE_KNOB_ODD, conv.odd)
    pad = conv.padding_idx
    if pad is not None:
        k.has_padding_idx = 1
        k.padding_idx = pad
    return 0


cdef int _raise_knobs(int err, conv) except -1:
    """Raise for the library's refusal ``err`` of a convention's knobs or of its
    width (pe_spec_of), from the error detail; ``conv`` names the convention."""
    cdef fastpe_error e
    fastpe_last_error(&e)
    if e.code == err and e.argument != NULL:
        arg = e.argument.decode()
        if arg == "d_model" and err == PE_EINVAL:
            raise ValueError(f"the {conv.name} convention needs an even d_model, "
                             f"got {_number(e.value)}")
        if arg == "denominator" and e.index >= 0:
            shift = f" (shift={conv.shift})" if conv.denominator == "h-shift" else ""
            raise ValueError(
                f"the {conv.name} convention divides by {conv.denominator}{shift}, which is "
                f"{e.value:g} at d_model={e.index}; use a larger d_model")
        if arg == "position_scale" and err == PE_EINVAL:
            if e.limit == 0:
                raise ValueError(f"position_scale must be finite and > 0, got {e.value!r}")
            raise ValueError(f"position_scale must be <= {e.limit:g}, got {e.value!r}")
        if arg == "shift" and err == PE_EINVAL:
            raise ValueError(f"shift must be finite, got {e.value!r}")
    return _raise(err)


def check_knobs(double base, double position_scale, double shift):
    """The library's check of a convention's numeric knobs (pe_knobs_check), for
    fastpe.Convention when it is built: ValueError naming the knob."""
    cdef fastpe_knobs k
    _knobs_init(&k, base, position_scale, shift)
    cdef int err = pe_settle(pe_knobs_check(&k))
    if err != FASTPE_OK:
        _raise_knobs(err, None)


cdef fastpe_spec *_spec_handle(conv, int64_t d_model) except NULL:
    """A new spec handle of a fastpe.Convention at width d_model, from the
    library's own constructor (fastpe_spec_create)."""
    cdef fastpe_knobs k
    cdef fastpe_spec *h = NULL
    _knobs_of(conv, &k)
    cdef int err = fastpe_spec_create(&k, d_model, &h)
    if err != FASTPE_OK:
        _raise_knobs(err, conv)
    return h


def fill_rows(out, Encoder enc, *, int64_t nseq, int64_t seq_len, int64_t offset=0,
              offsets=None, positions=None, zero_pos=None, bint add=False, double scale=1.0,
              int num_threads=0, Plan plan=None, bint fresh=False, bint bfloat16=False):
    """General fill of ``enc``'s spec with a chosen plan (None: prepared for
    this call) and zero position, for tests of the kernel's pieces (the public
    functions use Encoder.fill_rows).  ``plan``: a Plan made from an encoding
    of the same spec."""
    cdef const double *pmem = NULL
    if plan is not None:
        if not plan._matches(&enc.sp):
            raise ValueError("plan was made for a different spec")
        pmem = plan.mem
    return _fill_buffers(out, &enc.sp, pmem, nseq, seq_len, offset, offsets, positions,
                         zero_pos, add, scale, num_threads, fresh, NULL, bfloat16)


cdef class Plan:
    """What a fill computes before its first row, for one spec: the frequencies
    (double-double) and the B-row rotation table.  It depends on the spec only
    (never on the positions), so callers that fill many tables of the same width
    keep one (``fastpe._api`` caches them) and skip ~16 accurate row evaluations
    and B row compositions per call.  Immutable once built; safe to share
    between threads."""
    cdef double *mem
    cdef readonly int64_t nf
    cdef readonly int64_t block_rows
    cdef double w0, base, denom

    def __cinit__(self, Encoder enc not None):
        # (an Encoder's spec is the library's, its frequencies checked finite)
        cdef const pe_spec *spp = &enc.sp
        cdef int err
        self.nf = spp.nf
        self.block_rows = _block_rows(spp.nf)
        self.w0, self.base, self.denom = spp.w0, spp.base, spp.denom
        self.mem = <double *>malloc(_plan_doubles(spp.nf, self.block_rows) * sizeof(double))
        if self.mem == NULL:
            raise MemoryError("could not allocate a fastpe plan")
        with nogil:
            err = _prepare(self.mem, spp, 0, self.block_rows,
                           _threads(0, self.block_rows, spp.nf))
        if err != FASTPE_OK:
            _raise_for(err)

    def __dealloc__(self):
        free(self.mem)

    @property
    def nbytes(self):
        """Memory held, in bytes."""
        return _plan_doubles(self.nf, self.block_rows) * sizeof(double)

    cdef bint _matches(self, const pe_spec *sp) noexcept:
        return (sp.nf == self.nf and sp.w0 == self.w0 and sp.base == self.base
                and sp.denom == self.denom)


def plan_nbytes(Encoder enc not None):
    """Bytes a Plan for this encoding's spec would hold (to decide whether to keep one)."""
    return _plan_nbytes(enc.sp.nf)


cdef object _plan_nbytes(int64_t nf_):
    cdef object nf = nf_          # Python ints: no overflow for absurd widths
    return (4 * nf + 2 * (_block_rows(nf_) // 2 + 1) * nf) * 8


# ---------------------------------------------------------------------------
# Compiled encodings and the small-call paths
# ---------------------------------------------------------------------------

# A plan larger than this is prepared per call instead of kept (widths beyond
# ~75000 columns); the encoding cache (_fast.pxi) holds at most ENCODERS_MAX encodings and
# ENCODERS_MAX_BYTES of plans and anchors.
PLAN_MAX_BYTES = 4 << 20
ENCODERS_MAX = 64
ENCODERS_MAX_BYTES = 32 << 20


cdef class _Rows:
    """What Encoder and RopePlan fill rows by, set by their constructors: a spec,
    its plan (NULL: prepared per fill), its anchor cache and the position whose
    rows are zero (None: none).  One fill_rows serves both."""
    cdef const pe_spec *spp
    cdef const double *pmem
    cdef pe_anchor_cache *acp
    cdef readonly object zero_pos

    def fill_rows(self, out, *, int64_t nseq, int64_t seq_len, int64_t offset=0, offsets=None,
                  positions=None, bint add=False, double scale=1.0, int num_threads=0,
                  bint fresh=False, bint bfloat16=False, tuple errctx=None,
                  bint accurate=False):
        """Fill ``out`` (buffers converted by the caller, numbers checked by the
        library; see _fill_buffers)."""
        return _fill_buffers(out, self.spp, self.pmem, nseq, seq_len, offset, offsets,
                             positions, self.zero_pos, add, scale, num_threads, fresh,
                             self.acp, bfloat16, errctx, accurate)


cdef class Encoder(_Rows):
    """One encoding compiled for the kernel: the spec of a (convention, width),
    made by the library from the convention's knobs (pe_spec_of), its Plan
    (None for widths whose plan would exceed PLAN_MAX_BYTES: prepared per
    call), the position whose rows are zero (fairseq's padding) and the
    largest position the exact angle reduction allows.  Immutable once built,
    shared between threads; the public functions keep them in ``encoders``."""
    cdef pe_spec sp
    cdef readonly Plan plan
    cdef bint has_zero
    cdef int64_t zero
    cdef readonly double max_position
    cdef readonly int64_t d_model
    cdef pe_anchor_cache ac
    cdef bint ac_ready

    def __cinit__(self, convention, int64_t d_model):
        cdef fastpe_knobs k
        cdef int err
        _knobs_of(convention, &k)
        err = pe_settle(pe_spec_of(&k, d_model, &self.sp))
        if err != FASTPE_OK:
            _raise_knobs(err, convention)
        pe_anchor_init(&self.ac)
        self.ac_ready = True
        self.spp = &self.sp
        self.acp = &self.ac
        self.max_position = _max_position(&self.sp)
        self.d_model = self.sp.d
        self.has_zero = k.has_padding_idx
        self.zero = k.padding_idx
        self.zero_pos = k.padding_idx if k.has_padding_idx else None
        if _plan_nbytes(self.sp.nf) <= PLAN_MAX_BYTES:
            self.plan = Plan(self)
            self.pmem = self.plan.mem

    def __dealloc__(self):
        if self.ac_ready:
            pe_anchor_free(&self.ac)

    @property
    def nbytes(self):
        """Memory held: the plan and the anchor cache (its most)."""
        return (self.plan.nbytes if self.plan is not None else 0) + 16 * self.sp.nf

    def scratch_nbytes(self, int64_t rows, int num_threads, bint add):
        """Upper bound of the working memory (bytes) of a fill of ``rows`` rows."""
        return int(_scratch_bound(&self.sp, rows, num_threads, add))


def round_to_half(const double[::1] src, uint16_t[::1] dst, bint bfloat16=False):
    """dst[i] = the bits of src[i] rounded once to float16 (or bfloat16): the
    conversion of the table writers (lib/src/kernels/pe_half.h), for whole arrays."""
    cdef Py_ssize_t i, n = src.shape[0]
    if dst.shape[0] != n:
        raise ValueError("src and dst must have the same length")
    with nogil:
        if bfloat16:
            for i in range(n):
                dst[i] = pe_f64_to_bf16(src[i])
        else:
            for i in range(n):
                dst[i] = pe_f64_to_f16(src[i])


def max_position(double base, int64_t d_model):
    """Largest |position| the kernel accepts for this (base, d_model)."""
    cdef pe_spec sp = pe_spec_vaswani(d_model, base, 0)
    if not _frequencies_finite(&sp):
        return 0
    return int(_max_position(&sp))


include "_fast.pxi"
include "_rope_rotate.pxi"
include "_rope_check.pxi"
include "_rope_axes.pxi"
include "_rope_plans.pxi"
include "_rope_fast.pxi"
include "_rope_native.pxi"
include "_rope_tables.pxi"
include "_capi.pxi"
include "_rope_presets.pxi"
