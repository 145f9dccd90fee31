/* fastpe's 256-bit binary floating point (pe_mp.h). */
#include "pe_mp.h"

#include <string.h>

#define N PE_MP_LIMBS

/* ln 2 and pi truncated to 256 bits (mpmath at 400 bits): LN2_M 2^-256 and
 * PI_M 2^-254. */
static const uint32_t LN2_M[N] = {0x8baafa2bu, 0x8a0d175bu, 0x7298b62du, 0x40f34326u,
                                  0x03f2f6afu, 0xc9e3b398u, 0xd1cf79abu, 0xb17217f7u};
static const uint32_t PI_M[N] = {0x3b139b22u, 0x020bbea6u, 0x8a67cc74u, 0x29024e08u,
                                 0x80dc1cd1u, 0xc4c6628bu, 0x2168c234u, 0xc90fdaa2u};

/* ---- magnitudes: N limbs, least significant first ---------------------- */

static int mag_zero(const uint32_t *a) {
    for (int i = 0; i < N; i++)
        if (a[i])
            return 0;
    return 1;
}

static int mag_cmp(const uint32_t *a, const uint32_t *b) {
    for (int i = N - 1; i >= 0; i--)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

static int mag_bit(const uint32_t *a, int64_t i) {
    return i >= 0 && i < PE_MP_BITS ? (int)((a[i / 32] >> (i % 32)) & 1u) : 0;
}

static int mag_msb(const uint32_t *a) {
    for (int i = N - 1; i >= 0; i--)
        if (a[i])
            for (int b = 31; b >= 0; b--)
                if ((a[i] >> b) & 1u)
                    return 32 * i + b;
    return -1;
}

/* r = a >> k, truncated (r may be a) */
static void mag_shr(uint32_t *r, const uint32_t *a, int64_t k) {
    uint32_t t[N];
    int64_t w = k / 32;
    int b = (int)(k % 32);
    for (int i = 0; i < N; i++) {
        int64_t j = i + w;
        uint64_t lo = j < N ? a[j] : 0, hi = j + 1 < N ? a[j + 1] : 0;
        t[i] = k >= PE_MP_BITS ? 0u : (uint32_t)(((hi << 32 | lo) >> b) & 0xffffffffu);
    }
    memcpy(r, t, sizeof(t));
}

/* r = a << k, 0 <= k < PE_MP_BITS, the top bits dropped (r may be a) */
static void mag_shl(uint32_t *r, const uint32_t *a, int k) {
    uint32_t t[N];
    int w = k / 32, b = k % 32;
    for (int i = 0; i < N; i++) {
        int j = i - w;
        uint64_t cur = j >= 0 ? a[j] : 0, below = j - 1 >= 0 ? a[j - 1] : 0;
        t[i] = (uint32_t)(((cur << 32 | below) << b) >> 32);
    }
    memcpy(r, t, sizeof(t));
}

static uint32_t mag_add(uint32_t *r, const uint32_t *a, const uint32_t *b) {
    uint64_t c = 0;
    for (int i = 0; i < N; i++) {
        c += (uint64_t)a[i] + b[i];
        r[i] = (uint32_t)c;
        c >>= 32;
    }
    return (uint32_t)c;
}

/* r = a - b, a >= b */
static void mag_sub(uint32_t *r, const uint32_t *a, const uint32_t *b) {
    int64_t c = 0;
    for (int i = 0; i < N; i++) {
        c += (int64_t)a[i] - (int64_t)b[i];
        r[i] = (uint32_t)c;
        c = c < 0 ? -1 : 0;
    }
}

static pe_mp normalised(pe_mp x) {
    int top = mag_msb(x.m);
    if (top < 0) {
        memset(&x, 0, sizeof(x));
        return x;
    }
    mag_shl(x.m, x.m, PE_MP_BITS - 1 - top);
    x.e -= PE_MP_BITS - 1 - top;
    return x;
}

/* ---- arithmetic --------------------------------------------------------- */

pe_mp pe_mp_from(double x) {
    pe_mp r;
    int ex;
    memset(&r, 0, sizeof(r));
    if (x == 0.0 || !isfinite(x))
        return r; /* callers pass finite values; non-finite ones read as 0 */
    r.neg = x < 0;
    /* |x| = f 2^ex, f in [1/2, 1): its 53 bits, exact, at the top */
    uint64_t f = (uint64_t)ldexp(frexp(fabs(x), &ex), 53);
    r.m[N - 1] = (uint32_t)(f >> 21);
    r.m[N - 2] = (uint32_t)(f << 11);
    r.e = (int64_t)ex - PE_MP_BITS;
    return r;
}

pe_mp pe_mp_from_dd(pe_dd x) { return pe_mp_add(pe_mp_from(x.hi), pe_mp_from(x.lo)); }

pe_mp pe_mp_neg(pe_mp a) {
    if (!mag_zero(a.m))
        a.neg = !a.neg;
    return a;
}

pe_mp pe_mp_ldexp(pe_mp a, int64_t k) {
    if (!mag_zero(a.m))
        a.e += k;
    return a;
}

/* |a| vs |b| of normalised values */
static int abs_cmp(const pe_mp *a, const pe_mp *b) {
    int za = mag_zero(a->m), zb = mag_zero(b->m);
    if (za || zb)
        return za && zb ? 0 : za ? -1 : 1;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return mag_cmp(a->m, b->m);
}

int pe_mp_cmp(pe_mp a, pe_mp b) {
    int za = mag_zero(a.m), zb = mag_zero(b.m);
    if (za && zb)
        return 0;
    if (!za && !zb && a.neg == b.neg)
        return a.neg ? -abs_cmp(&a, &b) : abs_cmp(&a, &b);
    /* different signs, or one of them zero */
    if (za)
        return b.neg ? 1 : -1;
    if (zb)
        return a.neg ? -1 : 1;
    return a.neg ? -1 : 1;
}

/* a + b: the smaller operand's bits below the larger's last one are dropped,
 * an error of at most 2^e of the larger (one unit in its last place). */
pe_mp pe_mp_add(pe_mp a, pe_mp b) {
    pe_mp big, small, r;
    uint32_t s[N];
    if (mag_zero(a.m))
        return b;
    if (mag_zero(b.m))
        return a;
    if (abs_cmp(&a, &b) >= 0) {
        big = a;
        small = b;
    } else {
        big = b;
        small = a;
    }
    mag_shr(s, small.m, big.e - small.e);
    r = big;
    if (big.neg == small.neg) {
        if (mag_add(r.m, big.m, s)) { /* the carry: one more bit */
            mag_shr(r.m, r.m, 1);
            r.m[N - 1] |= 0x80000000u;
            r.e += 1;
        }
        return r;
    }
    mag_sub(r.m, big.m, s);
    return normalised(r);
}

pe_mp pe_mp_sub(pe_mp a, pe_mp b) { return pe_mp_add(a, pe_mp_neg(b)); }

/* a b, truncated to PE_MP_BITS bits: relative error below 2^-255. */
pe_mp pe_mp_mul(pe_mp a, pe_mp b) {
    uint32_t p[2 * N];
    pe_mp r;
    memset(&r, 0, sizeof(r));
    if (mag_zero(a.m) || mag_zero(b.m))
        return r;
    memset(p, 0, sizeof(p));
    for (int i = 0; i < N; i++) {
        uint64_t c = 0;
        for (int j = 0; j < N; j++) {
            c += (uint64_t)a.m[i] * b.m[j] + p[i + j];
            p[i + j] = (uint32_t)c;
            c >>= 32;
        }
        p[i + N] = (uint32_t)c;
    }
    /* the product's top bit is bit 511 or 510 */
    int shift = (p[2 * N - 1] >> 31) ? 0 : 1;
    for (int i = 0; i < N; i++) {
        uint64_t hi = p[N + i], lo = p[N + i - 1];
        r.m[i] = (uint32_t)((((hi << 32) | lo) << shift) >> 32);
    }
    r.neg = a.neg != b.neg;
    r.e = a.e + b.e + PE_MP_BITS - shift;
    return r;
}

/* a / b by long division, one quotient bit at a time: relative error below
 * 2^-255. */
pe_mp pe_mp_div(pe_mp a, pe_mp b) {
    uint32_t rem[N + 1], den[N + 1], q[N];
    pe_mp r;
    memset(&r, 0, sizeof(r));
    if (mag_zero(a.m) || mag_zero(b.m))
        return r;
    memcpy(rem, a.m, sizeof(a.m));
    rem[N] = 0;
    memcpy(den, b.m, sizeof(b.m));
    den[N] = 0;
    memset(q, 0, sizeof(q));
    /* the integer bit (A >= B), then PE_MP_BITS - 1 fraction bits: A / B in
     * (1/2, 2) as a PE_MP_BITS-bit number, q = floor(A 2^(BITS-1) / B) */
    for (int k = PE_MP_BITS - 1; k >= 0; k--) {
        int ge = 1;
        for (int i = N; i >= 0; i--)
            if (rem[i] != den[i]) {
                ge = rem[i] > den[i];
                break;
            }
        if (ge) {
            int64_t c = 0;
            for (int i = 0; i <= N; i++) {
                c += (int64_t)rem[i] - (int64_t)den[i];
                rem[i] = (uint32_t)c;
                c = c < 0 ? -1 : 0;
            }
            q[k / 32] |= 1u << (k % 32);
        }
        /* rem = 2 rem */
        for (int i = N; i > 0; i--)
            rem[i] = (rem[i] << 1) | (rem[i - 1] >> 31);
        rem[0] <<= 1;
    }
    memcpy(r.m, q, sizeof(q));
    r.neg = a.neg != b.neg;
    r.e = a.e - b.e - (PE_MP_BITS - 1);
    return normalised(r);
}

/* ---- rounding ------------------------------------------------------------ */

double pe_mp_round(pe_mp v, int prec, int emin, double eps, int *decided) {
    int64_t lead, Q, s, far;
    int ee, half, m1 = -1;
    uint64_t I = 0;
    double r;
    *decided = 1;
    if (mag_zero(v.m))
        return 0.0;
    if (prec < 2 || prec > 60) {
        *decided = 0;
        return NAN;
    }
    lead = v.e + PE_MP_BITS - 1; /* |v| in [2^lead, 2^(lead+1)) */
    Q = lead - (prec - 1) > emin ? lead - (prec - 1) : emin;
    s = Q - v.e; /* bits of m below the last kept one: at least BITS - prec */
    for (int64_t i = s - 1 + prec; i >= s; i--)
        I = (I << 1) | (uint64_t)mag_bit(v.m, i);
    half = mag_bit(v.m, s - 1);
    /* the distance to the nearest midpoint is at least 2^(m1 + e), m1 the top
     * bit of the bits below the half bit (half set) or of their complement */
    for (int64_t i = s - 2; i >= 0; i--) {
        if (mag_bit(v.m, i) == half) {
            m1 = (int)(i < PE_MP_BITS ? i : PE_MP_BITS);
            break;
        }
    }
    if (m1 < 0)
        m1 = half ? -1 : 0; /* G == 0: exactly the midpoint; complement 0: 1 */
    frexp(eps, &ee);        /* eps < 2^ee */
    far = m1 >= 0 && (eps == 0.0 || (m1 >= (int64_t)ee + PE_MP_BITS && ee <= -prec - 3));
    if (eps == 0.0 && half && m1 < 0)
        far = 1; /* an exact midpoint: ties to even */
    *decided = (int)far;
    if (half && (m1 >= 0 || (I & 1u)))
        I += 1;
    {
        int64_t x = Q < -20000 ? -20000 : Q > 20000 ? 20000 : Q;
        r = ldexp((double)I, (int)x);
    }
    return v.neg ? -r : r;
}

double pe_mp_to_double(pe_mp a) {
    int decided;
    return pe_mp_round(a, 53, -1074, 0.0, &decided);
}

/* ---- exp and log ---------------------------------------------------------- */

static pe_mp constant(const uint32_t *m, int64_t e) {
    pe_mp r;
    memcpy(r.m, m, sizeof(r.m));
    r.neg = 0;
    r.e = e;
    return r;
}

static pe_mp ln2(void) { return constant(LN2_M, -PE_MP_BITS); }

pe_mp pe_mp_pi(void) { return constant(PI_M, -(PE_MP_BITS - 2)); }

/* e^x = 2^n e^r, r = x - n ln 2 (|r| < 0.35), e^r = (e^(r / 2^16))^(2^16), the
 * inner one by 16 terms of its series (|r / 2^16| < 2^-17.5, so the 17th term
 * is below 2^-280).  Error: the terms and sums ~2^-251, doubled by each of the
 * 16 squarings (2^-235), r's own (|n| 2^-256 + x's last place, 2^-244): below
 * 2^-230 relative. */
pe_mp pe_mp_exp(pe_mp x) {
    double n = floor(pe_mp_to_double(x) * 1.4426950408889634 + 0.5);
    pe_mp r = pe_mp_sub(x, pe_mp_mul(ln2(), pe_mp_from(n)));
    pe_mp s = pe_mp_ldexp(r, -16), term = pe_mp_from(1.0), sum = pe_mp_from(1.0);
    for (int k = 1; k <= 16; k++) {
        term = pe_mp_div(pe_mp_mul(term, s), pe_mp_from((double)k));
        sum = pe_mp_add(sum, term);
    }
    for (int k = 0; k < 16; k++)
        sum = pe_mp_mul(sum, sum);
    return pe_mp_ldexp(sum, (int64_t)n);
}

/* ln x = k ln 2 + ln m, m in [0.7, 1.42): the double-double logarithm
 * (|error| < 2^-99, pe_dd.h), then two Newton steps y <- y + (m e^-y - 1), each
 * squaring the error (2^-199, then the arithmetic's 2^-229).  The error is
 * absolute, below 2^-228 + |k| 2^-255. */
pe_mp pe_mp_log(pe_mp x) {
    int64_t k = x.e + PE_MP_BITS - 1;
    if (mag_zero(x.m) || x.neg)
        return pe_mp_from(0.0); /* outside its domain: callers pass x > 0 */
    pe_mp m = x, y, one = pe_mp_from(1.0);
    m.e = -(PE_MP_BITS - 1);        /* m in [1, 2) */
    if (m.m[N - 1] > 0xb504f333u) { /* m > sqrt(2), about */
        m.e -= 1;
        k += 1;
    }
    {
        double hi = pe_mp_to_double(m);
        double lo = pe_mp_to_double(pe_mp_sub(m, pe_mp_from(hi)));
        /* ln(hi + lo) = ln(hi) + lo / hi, to 2^-106 */
        y = pe_mp_from_dd(pe_dd_add(pe_dd_log(hi), pe_dd_from(lo / hi)));
    }
    for (int step = 0; step < 2; step++)
        y = pe_mp_add(y, pe_mp_sub(pe_mp_mul(m, pe_mp_exp(pe_mp_neg(y))), one));
    return pe_mp_add(y, pe_mp_mul(ln2(), pe_mp_from((double)k)));
}

/* ---- sin and cos ----------------------------------------------------------- */

/* a / d for a small integer d > 0, one limb at a time over a magnitude widened
 * by one limb (so the quotient keeps PE_MP_BITS bits): relative error below
 * 2^-255. */
static pe_mp div_small(pe_mp a, uint32_t d) {
    uint32_t w[N + 1], q[N + 1];
    uint64_t rem = 0;
    pe_mp r;
    if (mag_zero(a.m))
        return a;
    w[0] = 0;
    memcpy(w + 1, a.m, sizeof(a.m));
    for (int i = N; i >= 0; i--) {
        uint64_t cur = rem << 32 | w[i];
        q[i] = (uint32_t)(cur / d);
        rem = cur % d;
    }
    /* q = floor(A 2^32 / d) lies in [2^255, 2^288): keep its top PE_MP_BITS bits */
    {
        int top = 32 * N + 31, low, b;
        while (!((q[top / 32] >> (top % 32)) & 1u))
            top--;
        low = top - (PE_MP_BITS - 1);
        b = low % 32;
        for (int i = 0; i < N; i++) {
            int j = low / 32 + i;
            uint64_t hi = j + 1 <= N ? q[j + 1] : 0, lo = q[j];
            r.m[i] = (uint32_t)((((hi << 32) | lo) >> b) & 0xffffffffu);
        }
        r.neg = a.neg;
        r.e = a.e - 32 + low;
    }
    return normalised(r);
}

/* sin x and cos x for |x| <= pi/4 (1 + 2^-40) by their series, 30 terms each:
 * the first omitted, (pi/4)^61 / 61!, is below 2^-290, and each of the ~60
 * operations adds a relative error below 2^-253 of a term at most |x| or 1:
 * an absolute error below 2^-245. */
static void sincos_small(pe_mp x, pe_mp *s, pe_mp *c) {
    pe_mp x2 = pe_mp_mul(x, x), ts = x, tc = pe_mp_from(1.0);
    pe_mp ss = ts, sc = tc;
    for (uint32_t k = 1; k <= 30; k++) {
        ts = pe_mp_neg(div_small(pe_mp_mul(ts, x2), (2 * k) * (2 * k + 1)));
        tc = pe_mp_neg(div_small(pe_mp_mul(tc, x2), (2 * k - 1) * (2 * k)));
        ss = pe_mp_add(ss, ts);
        sc = pe_mp_add(sc, tc);
    }
    *s = ss;
    *c = sc;
}

void pe_mp_sincos_turns(pe_mp t, pe_mp *s, pe_mp *c) {
    pe_mp u = pe_mp_ldexp(t, 2), x, sx, cx;
    /* n: the nearest integer to 4t (|4t| < 2^49, so the double has the bits
     * that decide it, or is off by one only where |4t - n| <= 1/2 + 2^-4) */
    double n = floor(pe_mp_to_double(u) + 0.5);
    int q = (int)(((int64_t)fmod(n, 4.0) + 4) % 4);
    /* u - n drops no bit above 2^-200 (both have their last bit near 2^-207) */
    x = pe_mp_mul(pe_mp_sub(u, pe_mp_from(n)), pe_mp_ldexp(pe_mp_pi(), -1));
    sincos_small(x, &sx, &cx);
    /* sin(x + q pi/2), cos(x + q pi/2) */
    switch (q) {
    case 0:
        *s = sx;
        *c = cx;
        break;
    case 1:
        *s = cx;
        *c = pe_mp_neg(sx);
        break;
    case 2:
        *s = pe_mp_neg(sx);
        *c = pe_mp_neg(cx);
        break;
    default:
        *s = pe_mp_neg(cx);
        *c = sx;
        break;
    }
}
