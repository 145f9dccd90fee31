# Included by kernel.pyx (one compilation unit, so that the calls between
# these parts inline as before): the fill driver.  Everything here runs without the GIL:
# a fill's plan, its split between threads and the row writers' dispatch.

cdef inline int64_t _block_rows(int64_t nf) noexcept nogil:
    """Rows per anchor block: a power of two that depends on the width only --
    never on seq_len, offset or the thread count -- so every entry is a pure
    function of (position, column) and chunked fills agree bitwise with one fill."""
    cdef int64_t b = MAX_BLOCK
    while b > SUB and 2 * b * nf > TABLE_DOUBLES:
        b //= 2
    return b


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef struct pe_rows:
    # Which positions the rows of a fill encode.  Row r = b*S + s (sequence b,
    # step s) sits at out + r*row_stride and encodes position
    #     K = (offs[b*offs_stride] if offs else offset) + (pos[b*psb + s*pss] if pos else s)
    # pos is int64 (pos_i) or float64 (pos_f, then offs must be NULL and offset 0).
    int64_t nseq
    int64_t S
    int64_t offset
    const int64_t *offs
    int64_t offs_stride
    const int64_t *pos_i
    const double *pos_f
    int64_t psb
    int64_t pss
    int has_zero_pos       # rows at this position get an all-zero encoding
    int64_t zero_pos
    int add                # 0: out = PE;  1: out = out*scale + PE
    double scale
    int fresh              # out was just allocated (no streaming stores: _default_stream_bytes)


cdef inline int64_t _int_position(const pe_rows *rq, int64_t b, int64_t s) noexcept nogil:
    cdef int64_t K = rq.offs[b * rq.offs_stride] if rq.offs != NULL else rq.offset
    return K + (rq.pos_i[b * rq.psb + s * rq.pss] if rq.pos_i != NULL else s)


cdef inline size_t _plan_doubles(int64_t nf, int64_t B) noexcept nogil:
    """A plan = [frequencies (4 nf) | table cos-1 ((B/2+1) nf) | table sin ((B/2+1) nf)]."""
    return <size_t>(4 * nf + 2 * (B // 2 + 1) * nf)


cdef int _prepare(double *plan, const pe_spec *sp, int64_t first, int64_t count,
                  int nt) noexcept nogil:
    """Fill a plan: the frequencies and the table e^{i a w}, a = 0 .. B/2, each row
    composed from two accurately evaluated factor rows (a = a1*b0 + a0).  Position
    K is encoded around the centre c of its block (see _centre) as the rotation by
    a = |K - c| (sign K - c).  Only the rows a needed by positions first .. first+count-1
    are built (all of them when count >= B): a short fill touches only a few."""
    cdef int64_t nf = sp.nf
    cdef int64_t B = _block_rows(nf)
    cdef int64_t H = B // 2
    cdef int64_t b0 = SUB                           # B >= SUB always
    cdef int64_t b1 = H // b0 + 1
    cdef int64_t a, r, q
    cdef int tid
    # factor rows (2 (b0 + b1) nf), which rows are needed (H+1 + b0 + b1), and per
    # thread one evaluation's discarded cosines (nf)
    cdef double *mem = <double *>malloc(<size_t>(2 * (b0 + b1) * nf + H + 1 + b0 + b1
                                                 + nt * nf) * sizeof(double))
    if mem == NULL:
        return FASTPE_ENOMEM
    cdef pe_freq fr = pe_freq_view(plan, nf)
    cdef double *Tm = plan + 4 * nf                 # table row a: Tm + a*nf, Ts + a*nf
    cdef double *Ts = Tm + (H + 1) * nf
    cdef double *F0m = mem                          # factor rows e^{i a0 w}, a0 < b0
    cdef double *F0s = F0m + b0 * nf
    cdef double *F1m = F0s + b0 * nf                # factor rows e^{i a1 b0 w}, a1 < b1
    cdef double *F1s = F1m + b1 * nf
    cdef double *need = F1s + b1 * nf               # need[a], need0[a0], need1[a1]
    cdef double *need0 = need + H + 1
    cdef double *need1 = need0 + b0
    cdef double *discard = need1 + b1

    if sp.wlist != NULL:
        pe_freqs_list(fr, nf, sp.wlist)
    else:
        pe_freqs(fr, nf, sp.w0, sp.base, sp.denom)
    for r in range(b0):
        need0[r] = 0
    for r in range(b1):
        need1[r] = 0
    for a in range(H + 1):
        need[a] = 1.0 if count >= B else 0.0
    if count < B:
        for q in range(count):
            r = (first + q) - _floordiv(first + q, B) * B     # K - centre + H
            need[r - H if r >= H else H - r] = 1.0
        need[0] = 1.0       # rotation by 0: rows evaluated directly (position 0, fractions)
    for a in range(H + 1):
        if need[a] != 0:
            need0[a % b0] = 1
            need1[a // b0] = 1
    if nt > H + 1:
        nt = <int>(H + 1)
    with parallel(num_threads=nt):
        tid = threadid()
        for r in prange(b0 + b1, schedule="static"):
            if r < b0:
                if need0[r] != 0:
                    pe_sincos_row(<double>r, fr, nf, F0s + r * nf, discard + tid * nf,
                                  F0m + r * nf)
            elif need1[r - b0] != 0:
                pe_sincos_row(<double>((r - b0) * b0), fr, nf, F1s + (r - b0) * nf,
                              discard + tid * nf, F1m + (r - b0) * nf)
        fastpe_omp_barrier()   # Cython's prange is `omp for nowait`
        for a in prange(H + 1, schedule="static"):
            if need[a] != 0:
                pe_compose(nf, F1m + (a // b0) * nf, F1s + (a // b0) * nf,
                           F0m + (a % b0) * nf, F0s + (a % b0) * nf, Tm + a * nf, Ts + a * nf)
    free(mem)
    return FASTPE_OK


cdef struct pe_ctx:
    # what every row of one fill shares (read-only in the parallel loop)
    const pe_spec *sp
    const pe_rows *rq
    pe_freq fr
    int64_t nf
    int64_t B
    const double *Tm
    const double *Ts


cdef inline void _encode_row(anyreal *row, const pe_ctx *c, int64_t b, int64_t s, double *ev,
                             int64_t *cached, double zero) noexcept nogil:
    """The encoding of the position of row (b, s) -> row.  ev: this thread's
    anchor scratch (3 nf), *cached: the anchor position it holds."""
    cdef const pe_rows *rq = c.rq
    cdef int64_t nf = c.nf, K
    cdef double Kf
    if rq.pos_f != NULL:
        Kf = rq.pos_f[b * rq.psb + s * rq.pss]
        if Kf != floor(Kf):
            # a fractional position: evaluate the row directly, then "rotate" it
            # by table row 0, which is exactly (0, 0)
            pe_sincos_row(Kf, c.fr, nf, ev, ev + nf, ev + 2 * nf)
            cached[0] = INT64_MIN
            _write_one(row, c, ev, 0, NULL, False, zero)
            return
        K = <int64_t>Kf
    else:
        K = _int_position(rq, b, s)
    if rq.has_zero_pos and K == rq.zero_pos:
        if anyreal is float:
            pe_zero_row_f32(row, c.sp.d, zero)
        elif anyreal is double:
            pe_zero_row_f64(row, c.sp.d, zero)
        elif anyreal is pe_f16:
            pe_zero_row_f16(<uint16_t *>row, c.sp.d, zero)
        else:
            pe_zero_row_bf16(<uint16_t *>row, c.sp.d, zero)
        return
    _write_at(row, c, K, ev, cached, NULL, False, zero)


cdef inline int64_t _centre(int64_t K, int64_t B) noexcept nogil:
    """The centre of K's block.  Blocks are the positions m*B .. m*B+B-1, centred
    at m*B + B/2: a table that starts at position 0 (the common case) is whole
    blocks, so nearly all of its rows are written as mirrored pairs."""
    return _floordiv(K, B) * B + B // 2


cdef inline void _anchor(const pe_ctx *c, int64_t K, double *ev, int64_t *cached) noexcept nogil:
    """Make ev hold the anchor of K's block: the accurate row at its centre;
    *cached is the centre it holds."""
    cdef int64_t centre = _centre(K, c.B)
    if centre != cached[0]:
        pe_sincos_row(<double>centre, c.fr, c.nf, ev, ev + c.nf, ev + 2 * c.nf)
        cached[0] = centre


cdef inline void _write_at(anyreal *dest, const pe_ctx *c, int64_t K, double *ev, int64_t *cached,
                           anyreal *buf, bint stream, double zero) noexcept nogil:
    """The row of integer position K, alone.  Position 0 is evaluated directly, so
    it is exact (sines 0, cosines 1), not the rotation of its block's anchor (ev
    then no longer holds an anchor: *cached is reset)."""
    if K == 0:
        pe_sincos_row(0.0, c.fr, c.nf, ev, ev + c.nf, ev + 2 * c.nf)
        cached[0] = INT64_MIN
        _write_one(dest, c, ev, 0, buf, stream, zero)
        return
    _anchor(c, K, ev, cached)
    _write_one(dest, c, ev, K - cached[0], buf, stream, zero)


cdef inline void _write_one(anyreal *dest, const pe_ctx *c, const double *ev, int64_t j,
                            anyreal *buf, bint stream, double zero) noexcept nogil:
    """Row at centre + j of the anchor in ev: rotated by table row |j|, sign of j
    (through buf when streaming)."""
    cdef int64_t a = j if j >= 0 else -j
    cdef anyreal *row = buf if stream else dest
    cdef double sg = 1.0 if j >= 0 else -1.0
    if anyreal is float:
        pe_row_f32(row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf, c.Ts + a * c.nf, sg)
    elif anyreal is double:
        pe_row_f64(row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf, c.Ts + a * c.nf, sg)
    elif anyreal is pe_f16:
        pe_row_f16(<uint16_t *>row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf,
                   c.Ts + a * c.nf, sg)
    else:
        pe_row_bf16(<uint16_t *>row, c.sp, zero, ev, ev + c.nf, c.Tm + a * c.nf,
                    c.Ts + a * c.nf, sg)
    if stream:
        pe_stream_copy(dest, row, c.sp.d * sizeof(anyreal))


cdef inline void _write_pair(anyreal *out, int64_t row_stride, int64_t rp, int64_t rm,
                             const pe_ctx *c, const double *ev, int64_t j, anyreal *buf,
                             bint stream) noexcept nogil:
    """Rows rp (centre + j) and rm (centre - j), j > 0."""
    cdef int64_t D = c.sp.d
    # the AVX-512 writers where the CPU has them (streaming: straight from registers)
    cdef const double *Tm = c.Tm + j * c.nf
    cdef const double *Ts = c.Ts + j * c.nf
    if anyreal is float:
        if pe_row2_v512_f32(out + rp * row_stride, out + rm * row_stride, c.sp, ev,
                            ev + c.nf, Tm, Ts, stream):
            return
    elif anyreal is double:
        if pe_row2_v512_f64(out + rp * row_stride, out + rm * row_stride, c.sp, ev,
                            ev + c.nf, Tm, Ts, stream):
            return
    elif anyreal is pe_f16:
        if pe_row2_v512_f16(<uint16_t *>(out + rp * row_stride),
                            <uint16_t *>(out + rm * row_stride), c.sp, ev, ev + c.nf, Tm, Ts,
                            stream):
            return
    else:
        if pe_row2_v512_bf16(<uint16_t *>(out + rp * row_stride),
                             <uint16_t *>(out + rm * row_stride), c.sp, ev, ev + c.nf, Tm, Ts,
                             stream):
            return
    cdef anyreal *p = buf if stream else out + rp * row_stride
    cdef anyreal *m = buf + D if stream else out + rm * row_stride
    if anyreal is float:
        pe_row2_f32(p, m, c.sp, 0.0, ev, ev + c.nf, Tm, Ts)
    elif anyreal is double:
        pe_row2_f64(p, m, c.sp, 0.0, ev, ev + c.nf, Tm, Ts)
    elif anyreal is pe_f16:
        pe_row2_f16(<uint16_t *>p, <uint16_t *>m, c.sp, 0.0, ev, ev + c.nf, Tm, Ts)
    else:
        pe_row2_bf16(<uint16_t *>p, <uint16_t *>m, c.sp, 0.0, ev, ev + c.nf, Tm, Ts)
    if stream:
        pe_stream_copy(out + rp * row_stride, p, D * sizeof(anyreal))
        pe_stream_copy(out + rm * row_stride, m, D * sizeof(anyreal))


cdef void _fill_blocks(anyreal *out, int64_t row_stride, const pe_ctx *c, int64_t off,
                       int64_t N, int64_t lo, int64_t hi, double *ev, int64_t *cached,
                       anyreal *buf, bint stream) noexcept nogil:
    """Contiguous rows 0..N-1 (positions off + r), block by block.  Rows centre+j
    and centre-j share their table row and its four products, so they are written
    together (bitwise as if alone).  Within a block the rows are taken in the
    order centre, (centre+1, centre-1), (centre+2, centre-2), ..., centre-B/2;
    blocks follow each other in memory order, so a block's first unit (a pair or a
    single row) has the index "rows before the block".  This thread writes the
    units whose index is in lo .. hi-1: the threads split the work into equal row
    counts without splitting a pair (which would leave two single rows)."""
    cdef int64_t B = c.B
    cdef int64_t H = c.B // 2
    cdef int64_t centre = _centre(off + lo, B)               # the block holding row lo
    cdef int64_t first, last, idx, j, K
    cdef bint has_p, has_m
    while centre - H <= off + N - 1:
        first = centre - H if centre - H > off else off        # its positions in the fill
        last = centre + H - 1 if centre + H - 1 < off + N - 1 else off + N - 1
        idx = first - off
        if idx >= hi:
            break
        for j in range(H + 1):
            has_p = j < H and first <= centre + j <= last
            has_m = j > 0 and first <= centre - j <= last
            if not (has_p or has_m):
                continue
            if idx >= hi:
                break
            if idx >= lo:
                if has_p and has_m:
                    _anchor(c, centre, ev, cached)
                    _write_pair(out, row_stride, centre + j - off, centre - j - off, c, ev, j,
                                buf, stream)
                else:
                    K = centre + j if has_p else centre - j
                    _write_at(out + (K - off) * row_stride, c, K, ev, cached, buf, stream, 0.0)
            idx += 2 if (has_p and has_m) else 1
        centre += B


cdef struct pe_fill:
    # One fill, prepared: what its rows share, its team and its scratch memory.
    # Built by _fill_setup, run in ranges of units by _fill_units, freed by _fill_free.
    pe_ctx c
    int nt
    bint stream             # streaming (non-temporal) stores
    bint contiguous         # one sequence of consecutive positions: mirrored pairs
    bint shared             # add: every sequence has the same positions
    int64_t units           # what the threads split: rows, or steps when shared
    int64_t per_thread      # scratch doubles per thread
    double *mem             # scratch (and the plan when the caller had none)
    double *scratch
    int64_t seed            # centre whose anchor thread 0's scratch holds (INT64_MIN: none)
    int64_t last            # the same after the last range ran


cdef struct pe_anchor_cache:
    # The last anchor row (sin, cos at a block centre) a small fill evaluated for
    # one encoding: consecutive decoding steps (positions k, k+1, ...) share their
    # block's anchor, the costliest part of a one-row call.  Copied in and out
    # under the lock, so it is never read half written.
    PyThread_type_lock lock
    double *data            # 2 nf doubles, or NULL
    int64_t centre          # INT64_MIN: empty


cdef int _fill_setup(pe_fill *f, const pe_spec *sp, const pe_rows *rq, int num_threads,
                     const double *plan, size_t itemsize) noexcept nogil:
    """Decide the team and the store kind, allocate scratch, and build the plan
    unless the caller has one.  ``plan``: a prepared plan for this spec (see
    Plan), or NULL to build the part of one this fill needs."""
    cdef int64_t D = sp.d
    cdef int64_t nf = sp.nf
    cdef int64_t S = rq.S
    cdef int64_t N = rq.nseq * S
    cdef int64_t B = _block_rows(nf)
    cdef int err
    memset(f, 0, sizeof(pe_fill))
    f.seed = INT64_MIN
    f.last = INT64_MIN
    f.contiguous = rq.nseq == 1 and rq.pos_i == NULL and rq.pos_f == NULL \
        and rq.offs == NULL and not rq.has_zero_pos
    # positions independent of the sequence: one encoded row per step serves all
    f.shared = rq.add and rq.offs == NULL \
        and ((rq.pos_i == NULL and rq.pos_f == NULL) or rq.psb == 0)
    f.units = S if f.shared else N
    # rows at explicit positions may each need an accurate evaluation
    f.nt = _threads(num_threads, N, D, N * D if f.contiguous or (rq.pos_i == NULL and
                    rq.pos_f == NULL) else N * (D + EVAL_WORK * nf))
    if f.nt > f.units:
        f.nt = <int>f.units
    cdef double stream_from = _stream_bytes_f64 if itemsize == 8 else _stream_bytes_f32
    f.stream = PE_HAVE_STREAM and not rq.add and not rq.fresh and D <= STREAM_MAX_WIDTH \
        and <double>N * <double>(D * itemsize) >= stream_from
    f.per_thread = 3 * nf + (D if rq.add else (2 * D if f.stream else 0))
    cdef size_t own = 0 if plan != NULL else _plan_doubles(nf, B)
    f.mem = <double *>malloc((own + <size_t>(f.per_thread * f.nt)) * sizeof(double))
    if f.mem == NULL:
        return FASTPE_ENOMEM
    f.scratch = f.mem + own
    if plan == NULL:
        err = _prepare(f.mem, sp, rq.offset if f.contiguous else 0, S if f.contiguous else B,
                       f.nt)
        if err != FASTPE_OK:
            _fill_free(f)
            return err
        plan = f.mem
    f.c.sp = sp
    f.c.rq = rq
    f.c.fr = pe_freq_view(<double *>plan, nf)
    f.c.nf = nf
    f.c.B = B
    f.c.Tm = plan + 4 * nf
    f.c.Ts = f.c.Tm + (B // 2 + 1) * nf
    return FASTPE_OK


cdef inline void _fill_free(pe_fill *f) noexcept nogil:
    free(f.mem)
    f.mem = NULL


cdef void _fill_units(anyreal *out, int64_t row_stride, const pe_fill *f, int64_t u0,
                      int64_t u1) noexcept nogil:
    """The hot loop: units u0 .. u1-1 of a prepared fill (all of them, or one
    chunk of a long fill), each thread a contiguous range of them.

    Integer positions K use the block decomposition K = c + j: an accurately
    evaluated anchor row at the centre c of K's block (see _centre), rotated by
    table row |j| (sign of j); position 0 is evaluated directly (exact).  Every
    entry is a pure function of (K, column): no dependence on the thread count,
    on the chunk a row came in, or on the path (mirrored pair, single row,
    explicit positions) that wrote it.  Non-integer positions are evaluated
    directly.

    The fused add (rq.add) encodes a row into a per-thread float64 buffer (it
    stays in L1), then adds it to x (x rounded once).  When every sequence has
    the same positions, each encoded row serves all of them: the threads split
    the steps, not the rows, and the row of the next sequence is prefetched."""
    cdef int64_t n = u1 - u0
    cdef int nt = f.nt
    if n <= 0:
        return
    if nt > n:
        nt = <int>n
    cdef int t
    if nt == 1:      # on the calling thread: no parallel region to enter for small fills
        _fill_part(out, row_stride, f, u0, u1, 0)
        return
    for t in prange(nt, num_threads=nt, schedule="static", chunksize=1):
        _fill_part(out, row_stride, f, u0 + t * n // nt, u0 + (t + 1) * n // nt, t)


cdef inline void _add_row(anyreal *x, const double *pe, int64_t n, double scale) noexcept nogil:
    """x = x*scale + pe, rounded once to x's type."""
    if anyreal is float:
        pe_add_row_f32(x, pe, n, scale)
    elif anyreal is double:
        pe_add_row_f64(x, pe, n, scale)
    elif anyreal is pe_f16:
        pe_add_row_f16(<uint16_t *>x, pe, n, scale)
    else:
        pe_add_row_bf16(<uint16_t *>x, pe, n, scale)


cdef void _fill_part(anyreal *out, int64_t row_stride, const pe_fill *f, int64_t u_lo,
                     int64_t u_hi, int t) noexcept nogil:
    """Units u_lo .. u_hi-1 of a fill, written by thread t (its scratch)."""
    cdef const pe_ctx *c = &f.c
    cdef const pe_rows *rq = f.c.rq
    cdef int64_t D = c.sp.d
    cdef int64_t nf = c.nf
    cdef int64_t S = rq.S
    cdef bint stream = f.stream
    cdef int64_t b, r
    # consecutive rows in one block share the anchor, which is evaluated once
    # (thread 0 may start with one already in its scratch: see pe_anchor_cache)
    cdef int64_t cached = f.seed if t == 0 else INT64_MIN
    cdef double *ev = f.scratch + f.per_thread * t
    cdef double *buf = ev + 3 * nf
    cdef anyreal *dest
    if not rq.add and f.contiguous:
        _fill_blocks(out, row_stride, c, rq.offset, rq.S, u_lo, u_hi, ev, &cached,
                     <anyreal *>buf, stream)
        if stream:
            pe_stream_fence()   # streaming stores are weakly ordered
    elif not rq.add:
        for r in range(u_lo, u_hi):
            b = r // S
            dest = out + r * row_stride
            if stream:
                _encode_row(<anyreal *>buf, c, b, r - b * S, ev, &cached, 0.0)
                pe_stream_copy(dest, buf, D * sizeof(anyreal))
            else:
                _encode_row(dest, c, b, r - b * S, ev, &cached, 0.0)
        if stream:
            pe_stream_fence()   # streaming stores are weakly ordered
    elif f.shared:
        for r in range(u_lo, u_hi):          # r: the step
            _encode_row(buf, c, 0, r, ev, &cached, -0.0)
            for b in range(rq.nseq):
                dest = out + (b * S + r) * row_stride
                if b + 1 < rq.nseq:
                    pe_prefetch_write(dest + S * row_stride, D * sizeof(anyreal))
                _add_row(dest, buf, D, rq.scale)
    else:
        for r in range(u_lo, u_hi):
            b = r // S
            _encode_row(buf, c, b, r - b * S, ev, &cached, -0.0)
            dest = out + r * row_stride
            _add_row(dest, buf, D, rq.scale)
    if t == 0:
        (<pe_fill *>f).last = cached


cdef int _fill_rows(anyreal *out, int64_t row_stride, const pe_spec *sp, const pe_rows *rq,
                    int num_threads, const double *plan) noexcept nogil:
    """A whole fill in one go (the C API's entry points; arguments validated)."""
    cdef pe_fill f
    if rq.nseq * rq.S == 0:
        return FASTPE_OK
    cdef int err = _fill_setup(&f, sp, rq, num_threads, plan, sizeof(anyreal))
    if err != FASTPE_OK:
        return err
    _fill_units(out, row_stride, &f, 0, f.units)
    _fill_free(&f)
    return FASTPE_OK


cdef inline void _init_rows(pe_rows *rq, int64_t nseq, int64_t S, bint has_zero,
                            int64_t zero) noexcept nogil:
    """nseq sequences of S rows at positions 0 .. S-1, nothing added (the
    callers set offsets, positions and the add)."""
    memset(rq, 0, sizeof(pe_rows))
    rq.nseq = nseq
    rq.S = S
    rq.scale = 1.0
    rq.has_zero_pos = has_zero
    rq.zero_pos = zero


cdef inline double _extent(int64_t offset, int64_t S) noexcept nogil:
    """Largest |position| of offset .. offset+S-1 (in double: no overflow)."""
    cdef double a = fabs(<double>offset)
    cdef double b = fabs(<double>offset + <double>(S - 1)) if S > 0 else 0.0
    return a if a >= b else b


cdef inline double _max_position(const pe_spec *sp) noexcept nogil:
    """The largest |position| whose angles the reduction keeps exact (for a spec
    whose frequencies are finite)."""
    cdef double limit = PE_MAX_TURNS / pe_spec_max_turns(sp)
    return limit if limit < PE_MAX_POSITION else PE_MAX_POSITION


cdef inline bint _frequencies_finite(const pe_spec *sp) noexcept nogil:
    """A tiny base (e.g. a subnormal) makes base^(-2i/d) overflow: even position 0
    would then give 0 * inf = NaN.  Such specs are refused, not filled."""
    return pe_spec_max_turns(sp) < 1e290   # (2^27 * f must not overflow in the Veltkamp split)


cdef double _scratch_bound(const pe_spec *sp, int64_t rows, int num_threads,
                           bint add) noexcept nogil:
    """Bytes a fill allocates beside its output, streaming row buffers and a plan
    of its own counted; in floating point (no overflow for absurd widths)."""
    cdef int nt = _threads(num_threads, rows, sp.d)
    cdef double nf = <double>sp.nf, B = <double>_block_rows(sp.nf)
    cdef double per_thread = 4 * nf + (1.0 if add else 2.0) * <double>sp.d
    cdef double plan = 4 * nf + (B + 2) * nf + 2 * (SUB + B / 2 / SUB + 1) * nf + B
    return (per_thread * nt + plan) * 8.0
