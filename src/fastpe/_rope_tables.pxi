# Included by kernel.pyx: RoPE rotations by angle tables the caller computed
# (per-head frequencies, mixed axes, xPos scales folded into cos and sin).

cdef extern from "pe_lib.h" nogil:
    int pe_rope_rotate(const pe_rope_rows *const *R, int nR, int nt, pe_poll_fn poll,
                       void *poll_ctx)


cdef int _rope_table_of(pe_rope_rows *R, table, Py_buffer *tv, int64_t rows_per_seq) except -1:
    """Point R at the float64 [sin | cos] table ``table`` (held in ``tv``): C-contiguous,
    ``rows_per_seq`` or batch x ``rows_per_seq`` rows (one per token) of 2 R.nf entries."""
    PyObject_GetBuffer(table, tv, PyBUF_STRIDES | PyBUF_FORMAT)
    if tv.ndim != 2 or _native_code(tv.format) != c'd' or tv.shape[1] != 2 * R.nf \
            or tv.strides[1] != 8 or tv.strides[0] != 16 * R.nf \
            or tv.shape[0] != (R.shape[0] * rows_per_seq if R.per_batch else rows_per_seq):
        PyBuffer_Release(tv)
        raise ValueError("table must be a C-contiguous float64 array of one [sin | cos] row "
                         "per token")
    R.table = <const double *>tv.buf
    return 0


def rope_rotate_tables(x, table, int seq_axis, bint half, double attention, int num_threads,
                       bint bfloat16=False, k=None, ktable=None, bint k_bfloat16=False,
                       bint per_batch=False):
    """Rotate the rows of ``x`` in place by the float64 [sin | cos] rows of ``table``
    (token (b, s) takes row ``b * S + s`` when ``per_batch``, else ``s``; b the index
    on axis 0), and those of ``k`` by ``ktable`` (shaped the same) in the same pass;
    each entry rounded once.  ``nf`` is half the table's width; the buffer checks are
    made here, that rows do not overlap is the caller's."""
    cdef Py_buffer view, kview, tv, ktv
    cdef pe_rope_rows R, RK
    cdef pe_rope_rows *Rs[2]
    cdef int nR = 0, err
    cdef int64_t nf = table.shape[1] // 2
    cdef bint have_t = False, have_kt = False
    cdef char kind = _rope_view(x, &view, 2 * nf, bfloat16, "x"), kkind = 0
    try:
        if not 0 <= seq_axis < view.ndim - 1 or (per_batch and seq_axis == 0):
            raise ValueError("seq_axis must be an axis of x before its last (not 0 per batch)")
        if _rope_rows_of(&R, &view, kind, seq_axis, half, nf, attention):
            Rs[nR] = &R
            nR += 1
        R.per_batch = per_batch
        _rope_table_of(&R, table, &tv, view.shape[seq_axis])
        have_t = True
        if k is not None:
            kkind = _rope_view(k, &kview, 2 * nf, k_bfloat16, "k")
            if kview.ndim != view.ndim or kview.shape[seq_axis] != view.shape[seq_axis] \
                    or kview.shape[0] != view.shape[0]:
                raise ValueError("q and k must agree on the batch and sequence axes")
            if _rope_rows_of(&RK, &kview, kkind, seq_axis, half, nf, attention):
                Rs[nR] = &RK
                nR += 1
            RK.per_batch = per_batch
            _rope_table_of(&RK, ktable, &ktv, view.shape[seq_axis])
            have_kt = True
        if nR:
            with nogil:
                err = pe_rope_rotate(<const pe_rope_rows *const *>Rs, nR, num_threads,
                                     _poll_signals, NULL)
            if err == PE_EINTR:
                _raise_pending()
            if err != FASTPE_OK:
                _raise_for(err)
    finally:
        if have_kt:
            PyBuffer_Release(&ktv)
        if kkind:
            PyBuffer_Release(&kview)
        if have_t:
            PyBuffer_Release(&tv)
        PyBuffer_Release(&view)
