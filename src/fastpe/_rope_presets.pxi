# Included by kernel.pyx: timm's rotary frequency rules and torch's float32 linspace
# (lib/src/rope_presets.c), for fastpe.rope_presets; the refusals as its messages.

cdef extern from "pe_crmath.h" nogil:
    int PE_RULE_FREQUENCY


cdef extern from "pe_presets.h" nogil:
    int PE_TIMM_PIXEL_LINEAR
    int PE_TIMM_PIXEL_LOG
    int PE_TIMM_LANGUAGE
    int PE_TIMM_DINO_TEMP
    int PE_TIMM_DINO_PERIODS
    int pe_timm_frequencies(int kind, int precision, int64_t n, int64_t half, double x,
                            double y, double *out, pe_rule_detail *why, pe_pow32_fn pow32,
                            void *pow_ctx)
    void pe_linspace_f32(double start, double end, int64_t steps, float *out)


_TIMM_KINDS = {
    "pixel_linear": PE_TIMM_PIXEL_LINEAR,
    "pixel_log": PE_TIMM_PIXEL_LOG,
    "language": PE_TIMM_LANGUAGE,
    "dinov3_temperature": PE_TIMM_DINO_TEMP,
    "dinov3_periods": PE_TIMM_DINO_PERIODS,
}


def _linspace32(double start, double end, int64_t steps):
    """torch.linspace(start, end, steps) in float32 (as float64), by the scalar
    formula of torch's CPU kernel (pe_presets.h), which its vectorised kernel can
    miss by an ulp."""
    if not 1 <= steps <= (<int64_t>1 << 31):   # (the caller's sizes, checked there)
        raise ValueError(f"steps must be an integer in 1 .. 2**31, got {steps}")
    out = _np.empty(steps, _np.float32)
    cdef float[::1] o = out
    with nogil:
        pe_linspace_f32(start, end, steps, &o[0])
    return out.astype(_np.float64)


def _timm_frequencies(str kind, int64_t n, double x, double y=_np.nan, int64_t half=0,
                      str precision="float32", pow32=None):
    """The ``n`` frequencies of one of timm's rules (``kind``: a key of _TIMM_KINDS;
    ``x``: max_res, temperature or min_period, ``y``: max_period, ``half``: DINOv3's
    dim // 2) in ``precision``, as float64; the refusals as ValueError naming the
    argument.  ``pow32(base, e)``: float32 powers of an array of exponents in place of
    the correctly rounded ones (for tests: torch's)."""
    cdef int k = _TIMM_KINDS[kind]
    cdef int prec = 0 if precision == "float32" else 1  # FASTPE_PRECISION_*
    cdef pe_rule_detail why
    cdef int err
    cdef double[::1] o
    # (a count the library refuses gets a buffer of 1: its refusal, not NumPy's)
    out = _np.empty(n if 1 <= n <= 2**30 else 1, _np.float64)
    o = out
    if precision not in ("float32", "float64"):
        raise ValueError(f"precision must be 'float32' or 'float64', got {precision!r}")
    if pow32 is None:
        with nogil:
            err = pe_timm_frequencies(k, prec, n, half, x, y, &o[0], &why, NULL, NULL)
    else:
        err = pe_timm_frequencies(k, prec, n, half, x, y, &o[0], &why, _python_pow32,
                                  <void *>pow32)
    pe_settle(err)
    if err == 0:
        return out[:n]
    code, arg, index, value, limit = _last_error()
    if err == FASTPE_ENOMEM:
        raise MemoryError(f"no memory for {n} frequencies")
    if why.reason == PE_RULE_FREQUENCY:
        if k == PE_TIMM_PIXEL_LINEAR or k == PE_TIMM_PIXEL_LOG:
            raise ValueError(
                f"max_res={x!r} gives pixel bands that are not finite and >= 0 "
                f"(band {why.index}: {why.value!r}, in {precision})")
        if k == PE_TIMM_LANGUAGE:
            raise ValueError(
                f"temperature={x!r} gives language bands outside [0, 1e280] "
                f"(band {why.index}: {why.value!r}, in {precision})")
        given = (f"temperature={x!r}" if k == PE_TIMM_DINO_TEMP
                 else f"min_period={x!r}, max_period={y!r}")
        raise ValueError(
            f"the periods of {given} must be finite and > 0 (in {precision}; frequency "
            f"{why.index}: 2 pi / period = {why.value!r})")
    if arg == "n":
        raise ValueError(f"the number of frequencies must be in 1 .. 2**30, got {n}")
    if arg in ("max_res", "temperature", "min_period", "max_period"):
        raise ValueError(f"{arg} must be a finite number > 0, got {value!r}")
    raise ValueError(f"{arg} = {value!r} refused by the timm rule {kind!r}")
