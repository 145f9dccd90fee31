# cython: language_level=3, boundscheck=False, wraparound=False, freethreading_compatible=True
"""A third-party Cython extension that fills tables through ``cimport``, inside
its own ``prange`` (built by tests/test_cython_api.py against the installed package)."""

from array import array

from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t

from fastpe.kernel cimport FASTPE_LAYOUT_INTERLEAVED, FASTPE_LAYOUT_SPLIT, fill_f32, fill_f64

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
