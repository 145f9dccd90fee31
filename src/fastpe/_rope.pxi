# Included by kernel.pyx: RoPE's rotation of query/key rows in place, one pass.

cdef inline void _rotate_row(real *x, const double *sn, const double *cs, int64_t nf,
                             bint half, double a) noexcept nogil:
    # each pair (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) in float64, rounded once
    cdef int64_t i, j1, j2
    cdef double x1, x2, c, s
    for i in range(nf):
        j1 = i if half else 2 * i
        j2 = i + nf if half else 2 * i + 1
        x1 = x[j1]
        x2 = x[j2]
        c = cs[i] * a
        s = sn[i] * a
        x[j1] = <real>(x1 * c - x2 * s)
        x[j2] = <real>(x2 * c + x1 * s)


cdef inline void _rotate_at(char *row, bint f32, const double *angles, int64_t nf, bint half,
                            double a) noexcept nogil:
    """Row at ``row`` rotated by ``angles`` ([sin | cos] of nf frequencies)."""
    if f32:
        _rotate_row(<float *>row, angles, angles + nf, nf, half, a)
    else:
        _rotate_row(<double *>row, angles, angles + nf, nf, half, a)


def rope_rotate(x, const int64_t[::1] row_offsets, const int64_t[::1] table_rows,
                const double[:, ::1] table, bint half, double attention, int num_threads):
    """Rotate the rows of ``x`` in place: row r starts ``row_offsets[r]`` bytes after
    ``x``'s first element and is rotated by the angles of ``table[table_rows[r]]``
    ([sin | cos] of nf frequencies; its first 2*nf entries rotate, the rest stay).
    Every row and table index is checked against x and table here, before the
    loop; that rows do not overlap is the caller's to check."""
    cdef Py_buffer view
    cdef int64_t n = row_offsets.shape[0], nf = table.shape[1] // 2, r, t
    cdef char *base
    cdef const char *lo
    cdef const char *hi
    cdef bint f32
    cdef char code
    cdef int nt
    if table_rows.shape[0] != n:
        raise ValueError("one table row per rotated row")
    PyObject_GetBuffer(x, &view, PyBUF_RECORDS)
    try:
        code = _native_code(view.format)
        if view.readonly or view.ndim < 1 or (code != c'f' and code != c'd'):
            raise ValueError("x must be a writable float32/float64 buffer")
        if n == 0 or nf == 0 or not _span(&view, &lo, &hi):
            return
        if view.shape[view.ndim - 1] < 2 * nf or (nf > 0 and view.shape[view.ndim - 1] > 1
                                                  and view.strides[view.ndim - 1] != view.itemsize):
            raise ValueError("x's last axis must be contiguous and hold the rotated pairs")
        f32 = view.itemsize == 4
        base = <char *>view.buf
        # every row inside x, every angle row inside the table: checked here, once
        for r in range(n):
            t = table_rows[r]
            if t < 0 or t >= table.shape[0] or base + row_offsets[r] < lo \
                    or base + row_offsets[r] + 2 * nf * view.itemsize > hi:
                raise ValueError("a row offset or table index is out of range")
        nt = _threads(num_threads, n, 2 * nf)
        with nogil:
            if nt <= 1:     # on the calling thread: no parallel region for small calls
                for r in range(n):
                    _rotate_at(base + row_offsets[r], f32, &table[table_rows[r], 0], nf, half,
                               attention)
            else:
                for r in prange(n, num_threads=nt, schedule="static"):
                    _rotate_at(base + row_offsets[r], f32, &table[table_rows[r], 0], nf, half,
                               attention)
    finally:
        PyBuffer_Release(&view)
