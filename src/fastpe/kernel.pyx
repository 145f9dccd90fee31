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
Results do not depend on the thread count (see lib/src/kernels/pe_core.h).
"""

from libc.stdint cimport int64_t, uint16_t
from libc.stdlib cimport malloc, free
from libc.math cimport isfinite, fabs
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

from fastpe import _system

cdef object _NDARRAY = _np.ndarray
cdef object _np_empty = _np.empty
cdef object _F32 = _np.dtype(_np.float32)
cdef object _F64 = _np.dtype(_np.float64)
cdef object _F32_TYPE = _np.float32
cdef object _F64_TYPE = _np.float64
# requests below this many bytes skip the memory-limit look-up (see _validate)
cdef double _small_request = _system.SMALL_REQUEST


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


cdef pe_spec _spec_from_dict(dict spec) except *:
    """The kernel's spec from the dict fastpe._conventions builds (field by field,
    one line per field of pe_spec on purpose: a missing key is a KeyError naming it)."""
    cdef pe_spec sp
    sp.d = spec["d"]
    sp.nf = spec["nf"]
    sp.w0 = spec["w0"]
    sp.base = spec["base"]
    sp.denom = spec["denom"]
    sp.layout = spec["layout"]
    sp.npairs = spec["npairs"]
    sp.lone_sin = spec["lone_sin"]
    sp.s_off = spec["s_off"]
    sp.ns = spec["ns"]
    sp.c_off = spec["c_off"]
    sp.nc = spec["nc"]
    sp.zero_col = spec["zero_col"]
    sp.wlist = NULL
    cdef const double[::1] w
    freqs = spec.get("frequencies")
    if freqs is not None:
        # one frequency per entry, radians per position; the dict's owner keeps
        # the array alive while the spec is used (Plan and Encoder keep a copy)
        w = freqs
        if w.shape[0] != sp.nf or sp.nf < 1 or not all(isfinite(v) and v >= 0 for v in w):
            raise ValueError(f"invalid kernel spec {spec}")
        sp.wlist = &w[0]
    # the column map must stay inside the row: checked here, once, not per row
    if sp.d < 1 or sp.nf < 0 or sp.nf > sp.d or not (sp.w0 > 0 and sp.base > 0 and sp.denom > 0):
        raise ValueError(f"invalid kernel spec {spec}")
    if sp.layout == FASTPE_LAYOUT_INTERLEAVED:
        if sp.npairs < 0 or 2 * sp.npairs + sp.lone_sin > sp.d or sp.npairs + sp.lone_sin > sp.nf:
            raise ValueError(f"invalid kernel spec {spec}")
    elif sp.layout == FASTPE_LAYOUT_SPLIT:
        if (sp.ns < 0 or sp.nc < 0 or sp.ns > sp.nf or sp.nc > sp.nf or sp.s_off < 0
                or sp.c_off < 0 or sp.s_off + sp.ns > sp.d or sp.c_off + sp.nc > sp.d):
            raise ValueError(f"invalid kernel spec {spec}")
    else:
        raise ValueError(f"invalid kernel spec {spec}")
    if sp.zero_col >= sp.d:
        raise ValueError(f"invalid kernel spec {spec}")
    return sp


def fill_rows(out, dict spec, *, int64_t nseq, int64_t seq_len, int64_t offset=0, offsets=None,
              positions=None, zero_pos=None, bint add=False, double scale=1.0, int num_threads=0,
              Plan plan=None, bint fresh=False, bint bfloat16=False):
    """General fill from a spec dict (see Encoder.fill_rows, which the public
    functions use; this form is for tests of the kernel's pieces).  ``plan``: a
    Plan made from this same spec (saves preparing one per call)."""
    cdef pe_spec sp = _spec_from_dict(spec)
    cdef const double *pmem = NULL
    if plan is not None:
        if not plan._matches(&sp):
            raise ValueError("plan was made for a different spec")
        pmem = plan.mem
    return _fill_buffers(out, &sp, pmem, nseq, seq_len, offset, offsets, positions, zero_pos,
                         add, scale, num_threads, fresh, NULL, bfloat16)


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
    cdef object freqs

    def __cinit__(self, dict spec):
        spec, self.freqs = _own_frequencies(spec)
        cdef pe_spec sp = _spec_from_dict(spec)
        cdef int err
        if not _frequencies_finite(&sp):
            raise ValueError(f"base={sp.base!r} gives frequencies that overflow a double")
        self.nf = sp.nf
        self.block_rows = _block_rows(sp.nf)
        self.w0, self.base, self.denom = sp.w0, sp.base, sp.denom
        self.mem = <double *>malloc(_plan_doubles(sp.nf, self.block_rows) * sizeof(double))
        if self.mem == NULL:
            raise MemoryError("could not allocate a fastpe plan")
        with nogil:
            err = _prepare(self.mem, &sp, 0, self.block_rows, _threads(0, self.block_rows, sp.nf))
        if err != FASTPE_OK:
            _raise_for(err)

    def __dealloc__(self):
        free(self.mem)

    @property
    def nbytes(self):
        """Memory held, in bytes."""
        return _plan_doubles(self.nf, self.block_rows) * sizeof(double)

    cdef bint _matches(self, const pe_spec *sp) noexcept:
        cdef const double[::1] w
        if (sp.wlist == NULL) != (self.freqs is None) or sp.nf != self.nf:
            return False
        if sp.wlist != NULL:
            w = self.freqs
            return memcmp(sp.wlist, &w[0], sp.nf * sizeof(double)) == 0
        return sp.w0 == self.w0 and sp.base == self.base and sp.denom == self.denom


cdef tuple _own_frequencies(dict spec):
    """(spec, its frequency list or None): a spec with a list gets a private copy,
    so that neither the caller's later writes nor its lifetime reach the kernel."""
    freqs = spec.get("frequencies")
    if freqs is None:
        return spec, None
    freqs = _np.array(freqs, dtype=_np.float64, order="C", copy=True)
    return dict(spec, frequencies=freqs), freqs


def plan_nbytes(dict spec):
    """Bytes a Plan for this spec would hold (to decide whether to cache one)."""
    cdef pe_spec sp = _spec_from_dict(spec)
    cdef object nf = sp.nf          # Python ints: no overflow for absurd widths
    return (4 * nf + 2 * (_block_rows(sp.nf) // 2 + 1) * nf) * 8


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
    its Plan (None for widths whose plan would exceed PLAN_MAX_BYTES: prepared
    per call), the position whose rows are zero (fairseq's padding) and the
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
    cdef object freqs

    def __cinit__(self, dict spec, zero_pos=None):
        spec, self.freqs = _own_frequencies(spec)
        pe_anchor_init(&self.ac)
        self.ac_ready = True
        self.sp = _spec_from_dict(spec)
        self.spp = &self.sp
        self.acp = &self.ac
        if not _frequencies_finite(&self.sp):
            raise ValueError(f"base={self.sp.base!r} gives frequencies base**(-i/denominator) "
                             "that overflow a double at this width; use a base closer to 1")
        self.max_position = _max_position(&self.sp)
        self.d_model = self.sp.d
        self.zero_pos = zero_pos
        self.has_zero = zero_pos is not None
        self.zero = zero_pos if zero_pos is not None else 0
        if plan_nbytes(spec) <= PLAN_MAX_BYTES:
            self.plan = Plan(spec)
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
