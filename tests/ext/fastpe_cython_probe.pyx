# cython: language_level=3, boundscheck=False, wraparound=False, freethreading_compatible=True
"""A third-party Cython extension that fills tables through ``cimport``, inside
its own ``prange`` (built by tests/test_cython_api.py against the installed package)."""

from array import array

from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t

from fastpe.kernel cimport (FASTPE_LAYOUT_INTERLEAVED, FASTPE_LAYOUT_SPLIT, fastpe_rope,
                            fastpe_spec, fill_f32, fill_f64, rope_apply_f32, rope_apply_f64,
                            rope_cache_f32, rope_cache_f64, rope_free, rope_new,
                            rope_rotary_dim, spec_add_f32, spec_add_f64, spec_d_model,
                            spec_fill_f32, spec_fill_f64, spec_fill_positions_f32,
                            spec_fill_positions_f64, spec_free, spec_from_knobs, spec_new)

LAYOUTS = {"interleaved": FASTPE_LAYOUT_INTERLEAVED, "split": FASTPE_LAYOUT_SPLIT}


def fill_tables(floating[:, :, ::1] out, int64_t d_model, int64_t first_offset,
                int64_t offset_step, double base, int layout, int outer_threads,
                int inner_threads):
    """Table t gets positions first_offset + t*offset_step ..., written to the
    first d_model columns of out[t] (row stride = out.shape[2]).  Returns the
    codes and the OpenMP thread id that filled each table."""
    cdef Py_ssize_t t, n = out.shape[0]
    cdef int64_t seq_len = out.shape[1], stride = out.shape[2]
    cdef int[::1] codes = array("i", [-1]) * n
    cdef int[::1] tids = array("i", [-1]) * n
    for t in prange(n, nogil=True, schedule="static", chunksize=1, num_threads=outer_threads):
        if floating is float:
            codes[t] = fill_f32(&out[t, 0, 0], seq_len, d_model, stride, base,
                                first_offset + t * offset_step, layout, inner_threads)
        else:
            codes[t] = fill_f64(&out[t, 0, 0], seq_len, d_model, stride, base,
                                first_offset + t * offset_step, layout, inner_threads)
        tids[t] = threadid()
    return list(codes), list(tids)


def fill_raw_f64(double[:, ::1] out, int64_t seq_len, int64_t d_model, int64_t row_stride,
                 double base, int64_t offset, int layout):
    """One call with arbitrary (possibly invalid) arguments: returns the code."""
    cdef int code
    with nogil:
        code = fill_f64(&out[0, 0], seq_len, d_model, row_stride, base, offset, layout, 0)
    return code


def spec_tables(convention, int64_t d_model, floating[:, ::1] table, int64_t offset,
                floating[:, ::1] at, const double[::1] positions, floating[:, :, ::1] x,
                double scale):
    """Through one compiled encoding of ``convention`` (a name or a Convention):
    table <- rows offset.., at <- rows at positions, x <- x*scale + PE (offset..).
    Returns the three codes and spec_d_model."""
    cdef fastpe_spec *h = spec_new(convention, d_model)
    cdef int c1, c2, c3
    cdef int64_t d
    with nogil:
        d = spec_d_model(h)
        if floating is float:
            c1 = spec_fill_f32(h, &table[0, 0], table.shape[0], table.shape[1], offset, 0)
            c2 = spec_fill_positions_f32(h, &at[0, 0], at.shape[0], at.shape[1],
                                         &positions[0], 0)
            c3 = spec_add_f32(h, &x[0, 0, 0], x.shape[0], x.shape[1], x.shape[2], offset,
                              scale, 0)
        else:
            c1 = spec_fill_f64(h, &table[0, 0], table.shape[0], table.shape[1], offset, 0)
            c2 = spec_fill_positions_f64(h, &at[0, 0], at.shape[0], at.shape[1],
                                         &positions[0], 0)
            c3 = spec_add_f64(h, &x[0, 0, 0], x.shape[0], x.shape[1], x.shape[2], offset,
                              scale, 0)
        spec_free(h)
    return c1, c2, c3, d


def spec_knobs(int64_t d_model, double base, bytes denominator, double shift):
    """spec_from_knobs with the other knobs at their defaults: spec_d_model, or the
    exception spec_from_knobs raised."""
    cdef fastpe_spec *h = spec_from_knobs(d_model, base, denominator, shift, 1.0,
                                          b"interleaved", b"error", 0, 0)
    cdef int64_t d = spec_d_model(h)
    spec_free(h)
    return d


def rope_steps(rope_parameters, floating[:, :, :, ::1] q, int64_t first_offset,
               floating[:, ::1] cos, floating[:, ::1] sin, int outer_threads):
    """A decoding loop's rotations from inside a prange: q[t] (heads, 1, head_dim)
    rotated at position first_offset + t, one handle shared by the threads; and the
    cache of positions first_offset .. into cos/sin.  Returns the codes and the
    rotary dim."""
    cdef fastpe_rope *h = rope_new(rope_parameters, q.shape[3], 0, -1, NULL)
    cdef Py_ssize_t t, n = q.shape[0]
    cdef int64_t heads = q.shape[1], d = q.shape[3]
    cdef int[::1] codes = array("i", [-1]) * n
    cdef int c
    cdef int64_t dim
    for t in prange(n, nogil=True, schedule="static", chunksize=1, num_threads=outer_threads):
        if floating is float:
            codes[t] = rope_apply_f32(h, &q[t, 0, 0, 0], 1, 1, heads, heads * d, d, d, NULL,
                                      first_offset + t, FASTPE_LAYOUT_SPLIT, 1)
        else:
            codes[t] = rope_apply_f64(h, &q[t, 0, 0, 0], 1, 1, heads, heads * d, d, d, NULL,
                                      first_offset + t, FASTPE_LAYOUT_SPLIT, 1)
    with nogil:
        dim = rope_rotary_dim(h)
        if floating is float:
            c = rope_cache_f32(h, &cos[0, 0], &sin[0, 0], cos.shape[0], cos.shape[1], NULL,
                               first_offset, FASTPE_LAYOUT_SPLIT, 0)
        else:
            c = rope_cache_f64(h, &cos[0, 0], &sin[0, 0], cos.shape[0], cos.shape[1], NULL,
                               first_offset, FASTPE_LAYOUT_SPLIT, 0)
        rope_free(h)
    return list(codes), c, dim
