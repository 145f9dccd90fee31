# Included by kernel.pyx: the C library's multi-axis entry points, for the tests that
# compare them with the Python API.

from libc.stdint cimport int32_t


cdef extern from "fastpe/fastpe.h" nogil:
    fastpe_rope *fastpe_rope_from_axes(const double *inv_freq, int64_t nf, const int32_t *axis,
                                       int n_axes, double attention_factor)
    int fastpe_rope_section_axes(const int64_t *sections, int n_axes, int section_layout,
                                 int32_t *axis, int64_t nf)
    int fastpe_rope_n_axes(const fastpe_rope *rope)
    int fastpe_rope_cache_axes_f32(const fastpe_rope *h, float *cos, float *sin, int64_t n,
                                   int64_t row_stride, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_cache_axes_f64(const fastpe_rope *h, double *cos, double *sin, int64_t n,
                                   int64_t row_stride, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_cache_axes_f16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin,
                                   int64_t n, int64_t row_stride, const int64_t *positions,
                                   int layout, int num_threads)
    int fastpe_rope_cache_axes_bf16(const fastpe_rope *h, uint16_t *cos, uint16_t *sin,
                                    int64_t n, int64_t row_stride, const int64_t *positions,
                                    int layout, int num_threads)
    int fastpe_rope_apply_axes_f32(const fastpe_rope *h, float *x, int64_t batch, int64_t seq,
                                   int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                   int64_t stride_head, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_apply_axes_f64(const fastpe_rope *h, double *x, int64_t batch, int64_t seq,
                                   int64_t heads, int64_t stride_batch, int64_t stride_seq,
                                   int64_t stride_head, const int64_t *positions, int layout,
                                   int num_threads)
    int fastpe_rope_apply_axes_f16(const fastpe_rope *h, uint16_t *x, int64_t batch,
                                   int64_t seq, int64_t heads, int64_t stride_batch,
                                   int64_t stride_seq, int64_t stride_head,
                                   const int64_t *positions, int layout, int num_threads)
    int fastpe_rope_apply_axes_bf16(const fastpe_rope *h, uint16_t *x, int64_t batch,
                                    int64_t seq, int64_t heads, int64_t stride_batch,
                                    int64_t stride_seq, int64_t stride_head,
                                    const int64_t *positions, int layout, int num_threads)


def _rope_section_axes_native(sections, int section_layout, int64_t nf):
    """The library's fastpe_rope_section_axes: (code, axis as int32, -1 where unwritten)."""
    cdef int64_t[::1] sec = _np.ascontiguousarray(sections, dtype=_np.int64)
    cdef int32_t[::1] axis = _np.full(max(nf, 1), -1, dtype=_np.int32)
    cdef int err = fastpe_rope_section_axes(&sec[0] if sec.shape[0] else NULL,
                                            <int>sec.shape[0], section_layout, &axis[0], nf)
    return err, _np.asarray(axis)[:nf]


def _rope_axes_native(inv_freq, axis, double attention, positions, str what, a, b=None, *,
                      bint bfloat16=False, bint half=True, n=None, row_stride=None,
                      int64_t batch=0, int64_t seq=0, int64_t heads=0, int64_t sb=0,
                      int64_t ss=0, int64_t sh=0, int num_threads=0):
    """The library's multi-axis entry points on a handle of ``inv_freq`` (float64)
    and ``axis`` (int32 per frequency; None: a plain fastpe_rope_from_frequencies
    handle), for tests: ``what`` "cache" (fastpe_rope_cache_axes_* into the
    C-contiguous (n, rotary_dim) arrays a, b) or "apply" (fastpe_rope_apply_axes_*
    on a's buffer with the given sizes and strides, in elements), the entry type
    from a's dtype (uint16 with ``bfloat16``: bfloat16 bits); "cache1" the 1-axis
    fastpe_rope_cache_f64, "n_axes" fastpe_rope_n_axes.  ``positions``: a
    C-contiguous int64 array or None (NULL).  The code returned, or -1 when the
    handle was refused (NULL)."""
    cdef double[::1] w = _np.ascontiguousarray(inv_freq, dtype=_np.float64)
    cdef int32_t[::1] ax
    cdef const int64_t *pp = NULL
    cdef int64_t[::1] pv
    cdef fastpe_rope *h
    cdef Py_buffer av, bv
    cdef char code
    cdef int64_t nn, rs
    cdef int err, lay = FASTPE_LAYOUT_SPLIT if half else FASTPE_LAYOUT_INTERLEAVED
    if axis is None:
        h = fastpe_rope_from_frequencies(&w[0], w.shape[0], attention)
    else:
        ax = _np.ascontiguousarray(axis, dtype=_np.int32)
        h = fastpe_rope_from_axes(&w[0], w.shape[0], &ax[0], <int>(_np.max(axis) + 1)
                                  if len(axis) else 1, attention)
    if h == NULL:
        return -1
    if positions is not None:
        pv = _np.ascontiguousarray(positions, dtype=_np.int64).reshape(-1)
        pp = &pv[0] if pv.shape[0] else <const int64_t *>&_ZERO64
    PyObject_GetBuffer(a, &av, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
    try:
        code = _native_code(av.format)
        if code == c'H' and bfloat16:
            code = c'b'
        elif code not in (c'f', c'd', c'e'):
            raise ValueError("a must hold float16, bfloat16, float32 or float64 entries")
        if what == "n_axes":
            err = fastpe_rope_n_axes(h)
        elif what == "cache1":     # the 1-axis entry point (float64), offset 0
            PyObject_GetBuffer(b, &bv, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
            err = fastpe_rope_cache_f64(h, <double *>av.buf, <double *>bv.buf, av.shape[0],
                                        av.strides[0] // 8, pp, 0, lay, num_threads)
            PyBuffer_Release(&bv)
        elif what == "cache":
            PyObject_GetBuffer(b, &bv, PyBUF_STRIDES | PyBUF_FORMAT | PyBUF_WRITABLE)
            try:
                nn = av.shape[0] if n is None else n
                rs = av.strides[0] // av.itemsize if row_stride is None else row_stride
                with nogil:
                    if code == c'f':
                        err = fastpe_rope_cache_axes_f32(h, <float *>av.buf, <float *>bv.buf, nn,
                                                         rs, pp, lay, num_threads)
                    elif code == c'd':
                        err = fastpe_rope_cache_axes_f64(h, <double *>av.buf, <double *>bv.buf,
                                                         nn, rs, pp, lay, num_threads)
                    elif code == c'e':
                        err = fastpe_rope_cache_axes_f16(h, <uint16_t *>av.buf,
                                                         <uint16_t *>bv.buf, nn, rs, pp,
                                                         lay, num_threads)
                    else:
                        err = fastpe_rope_cache_axes_bf16(h, <uint16_t *>av.buf,
                                                          <uint16_t *>bv.buf, nn, rs, pp,
                                                          lay, num_threads)
            finally:
                PyBuffer_Release(&bv)
        else:
            with nogil:
                if code == c'f':
                    err = fastpe_rope_apply_axes_f32(h, <float *>av.buf, batch, seq, heads, sb, ss,
                                                     sh, pp, lay, num_threads)
                elif code == c'd':
                    err = fastpe_rope_apply_axes_f64(h, <double *>av.buf, batch, seq, heads, sb,
                                                     ss, sh, pp, lay, num_threads)
                elif code == c'e':
                    err = fastpe_rope_apply_axes_f16(h, <uint16_t *>av.buf, batch, seq, heads,
                                                     sb, ss, sh, pp, lay, num_threads)
                else:
                    err = fastpe_rope_apply_axes_bf16(h, <uint16_t *>av.buf, batch, seq, heads,
                                                      sb, ss, sh, pp, lay, num_threads)
    finally:
        PyBuffer_Release(&av)
        fastpe_rope_free(h)
    return err
