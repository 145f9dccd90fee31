/*
 * Digests of the library's tables over a grid of cases, one line per case:
 *
 *     kind dtype layout d_model seq_len offset base digest
 *
 * kind: fill (the table), add (x = x*0.5 + PE over 2 sequences, x set by
 * x_init), positions / add_positions (row r at position offset + 2.5 r - 3),
 * and spec / spec_add / spec_positions, the same through a compiled spec, whose
 * lines name the convention in the layout field (custom: the knobs of custom()),
 * the RoPE cache and rotations (rope_*, see sweep_rope: d_model is nf, base
 * the attention factor), and the RoPE caches of handles from the rules
 * (rope_rule_<rope_type>, see sweep_rules: d_model is head_dim, base the
 * precision's bits), and the multi-axis RoPE cache and rotations (rope_axes_*,
 * see sweep_rope_axes: as rope_*).
 * Every case is filled with 1, 2 and 3 threads, which must agree bitwise.
 * With no argument the lines are printed; with the committed file as argument
 * they are compared with it (exit 1 on any difference).  tests/test_clib.py
 * computes the same digests from the Python functions.
 *
 * This file includes no Python header: it must build and run without Python.
 */
#ifdef Py_PYTHON_H
#error "the C library's tests must not include Python.h"
#endif
#include <fastpe/fastpe.h>

#include "digest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *DTYPES[4] = {"float32", "float64", "float16", "bfloat16"};
static const size_t ITEM[4] = {4, 8, 2, 2};
static const char *LAYOUTS[2] = {"interleaved", "split"};

/* The exact 16-bit patterns of the small dyadic values x_init makes. */
static uint16_t to_bf16(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

static uint16_t to_f16(double v) {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if ((u & 0x7fffffff) == 0)
        return sign;
    int e = (int)((u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (e << 10) | ((u >> 13) & 0x3ff));
}

/* x[i] = ((37 i) mod 201 - 100) / 16: exact in every dtype. */
static void x_init(void *x, int dt, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double v = (double)((int64_t)((37 * i) % 201) - 100) / 16.0;
        if (dt == 0)
            ((float *)x)[i] = (float)v;
        else if (dt == 1)
            ((double *)x)[i] = v;
        else if (dt == 2)
            ((uint16_t *)x)[i] = to_f16(v);
        else
            ((uint16_t *)x)[i] = to_bf16(v);
    }
}

/* A spec for a preset name or "custom" (every knob away from its default). */
static fastpe_spec *make_spec(const char *conv, int64_t d) {
    fastpe_knobs k;
    fastpe_spec *h = NULL;
    if (strcmp(conv, "custom") == 0) {
        fastpe_knobs_preset("vaswani", &k);
        k.base = 321.0;
        k.denominator = FASTPE_DENOM_H_MINUS_SHIFT;
        k.shift = 0.5;
        k.position_scale = 2.0;
        k.columns = FASTPE_COLUMNS_SPLIT_COS_FIRST;
        k.odd = FASTPE_ODD_ZERO;
        k.has_padding_idx = 1;
        k.padding_idx = 4;
    } else if (fastpe_knobs_preset(conv, &k) != FASTPE_OK) {
        return NULL;
    }
    if (fastpe_spec_create(&k, d, &h) != FASTPE_OK)
        return NULL;
    return h;
}

static int run_spec(const char *kind, const fastpe_spec *h, int dt, int64_t d, int64_t S,
                    int64_t off, int nt, void *buf, const double *pos) {
    if (strcmp(kind, "spec") == 0) {
        switch (dt) {
        case 0:
            return fastpe_spec_fill_f32(h, (float *)buf, S, d, off, nt);
        case 1:
            return fastpe_spec_fill_f64(h, (double *)buf, S, d, off, nt);
        case 2:
            return fastpe_spec_fill_f16(h, (uint16_t *)buf, S, d, off, nt);
        default:
            return fastpe_spec_fill_bf16(h, (uint16_t *)buf, S, d, off, nt);
        }
    }
    if (strcmp(kind, "spec_add") == 0) {
        x_init(buf, dt, (size_t)(2 * S * d));
        switch (dt) {
        case 0:
            return fastpe_spec_add_f32(h, (float *)buf, 2, S, d, off, 0.5, nt);
        case 1:
            return fastpe_spec_add_f64(h, (double *)buf, 2, S, d, off, 0.5, nt);
        case 2:
            return fastpe_spec_add_f16(h, (uint16_t *)buf, 2, S, d, off, 0.5, nt);
        default:
            return fastpe_spec_add_bf16(h, (uint16_t *)buf, 2, S, d, off, 0.5, nt);
        }
    }
    return dt == 0 ? fastpe_spec_fill_positions_f32(h, (float *)buf, S, d, pos, nt)
                   : fastpe_spec_fill_positions_f64(h, (double *)buf, S, d, pos, nt);
}

static int run(const char *kind, int dt, int lay, int64_t d, int64_t S, int64_t off, double base,
               int nt, void *buf, const double *pos) {
    if (strcmp(kind, "fill") == 0)
        return fastpe_fill_poll(buf, dt, S, d, d, base, off, lay, nt, NULL, NULL);
    if (strcmp(kind, "add") == 0) {
        x_init(buf, dt, (size_t)(2 * S * d));
        switch (dt) {
        case 0:
            return fastpe_add_f32((float *)buf, 2, S, d, d, base, off, 0.5, lay, nt);
        case 1:
            return fastpe_add_f64((double *)buf, 2, S, d, d, base, off, 0.5, lay, nt);
        case 2:
            return fastpe_add_f16((uint16_t *)buf, 2, S, d, d, base, off, 0.5, lay, nt);
        default:
            return fastpe_add_bf16((uint16_t *)buf, 2, S, d, d, base, off, 0.5, lay, nt);
        }
    }
    if (strcmp(kind, "positions") == 0)
        return dt == 0 ? fastpe_fill_positions_f32((float *)buf, S, d, d, pos, base, lay, nt)
                       : fastpe_fill_positions_f64((double *)buf, S, d, d, pos, base, lay, nt);
    x_init(buf, dt, (size_t)(S * d));
    return dt == 0 ? fastpe_add_positions_f32((float *)buf, S, d, d, pos, base, 0.5, lay, nt)
                   : fastpe_add_positions_f64((double *)buf, S, d, d, pos, base, 0.5, lay, nt);
}

/* The largest offset whose position the library accepts for (d, base). */
static int64_t limit_offset(int64_t d, double base) {
    int64_t lo = 0, hi = (int64_t)1 << 53;
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (fastpe_fill_f64(NULL, 0, d, d, base, mid, 0, 1) == FASTPE_OK)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static FILE *expected;
static int failures;

static void emit(const char *line) {
    if (expected == NULL) {
        fputs(line, stdout);
        return;
    }
    char want[512];
    if (fgets(want, sizeof(want), expected) == NULL || strcmp(want, line) != 0) {
        if (failures++ < 20)
            fprintf(stderr, "digest differs:\n  got  %s  want %s", line,
                    want[0] ? want : "(end of file)\n");
    }
}

static void one(const char *kind, int dt, int lay, int64_t d, int64_t S, int64_t off, double base) {
    int64_t rows = strcmp(kind, "add") == 0 ? 2 * S : S;
    size_t nbytes = (size_t)(rows * d) * ITEM[dt];
    void *buf = malloc(nbytes + 8);
    double *pos = (double *)malloc((size_t)S * sizeof(double));
    uint64_t h[3];
    char line[512];
    if (buf == NULL || pos == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int64_t r = 0; r < S; r++)
        pos[r] = (double)off + 2.5 * (double)r - 3.0;
    for (int nt = 1; nt <= 3; nt++) {
        int err = run(kind, dt, lay, d, S, off, base, nt, buf, pos);
        if (err != FASTPE_OK) {
            fprintf(stderr, "%s %s d=%" PRId64 " S=%" PRId64 " offset=%" PRId64 ": %s\n", kind,
                    DTYPES[dt], d, S, off, fastpe_strerror(err));
            exit(2);
        }
        h[nt - 1] = digest(buf, nbytes);
    }
    if (h[0] != h[1] || h[0] != h[2]) {
        fprintf(stderr, "thread counts disagree: %s %s d=%" PRId64 " S=%" PRId64 "\n", kind,
                DTYPES[dt], d, S);
        failures++;
    }
    snprintf(line, sizeof(line),
             "%s %s %s %" PRId64 " %" PRId64 " %" PRId64 " %.17g %016" PRIx64 "\n", kind,
             DTYPES[dt], LAYOUTS[lay], d, S, off, base, h[0]);
    emit(line);
    free(buf);
    free(pos);
}

static void one_spec(const char *kind, const char *conv, int dt, int64_t d, int64_t S,
                     int64_t off) {
    int64_t rows = strcmp(kind, "spec_add") == 0 ? 2 * S : S;
    size_t nbytes = (size_t)(rows * d) * ITEM[dt];
    void *buf = malloc(nbytes + 8);
    double *pos = (double *)malloc((size_t)S * sizeof(double));
    fastpe_spec *h = make_spec(conv, d);
    uint64_t hs[3];
    char line[512];
    if (buf == NULL || pos == NULL || h == NULL) {
        fprintf(stderr, "no spec %s at d=%" PRId64 " (or out of memory)\n", conv, d);
        exit(2);
    }
    for (int64_t r = 0; r < S; r++)
        pos[r] = (double)off + 2.5 * (double)r - 3.0;
    for (int nt = 1; nt <= 3; nt++) {
        int err = run_spec(kind, h, dt, d, S, off, nt, buf, pos);
        if (err != FASTPE_OK) {
            fprintf(stderr, "%s %s %s d=%" PRId64 ": %s\n", kind, conv, DTYPES[dt], d,
                    fastpe_strerror(err));
            exit(2);
        }
        hs[nt - 1] = digest(buf, nbytes);
    }
    if (hs[0] != hs[1] || hs[0] != hs[2]) {
        fprintf(stderr, "thread counts disagree: %s %s d=%" PRId64 "\n", kind, conv, d);
        failures++;
    }
    snprintf(line, sizeof(line), "%s %s %s %" PRId64 " %" PRId64 " %" PRId64 " 0 %016" PRIx64 "\n",
             kind, DTYPES[dt], conv, d, S, off, hs[0]);
    emit(line);
    fastpe_spec_free(h);
    free(buf);
    free(pos);
}

static void sweep_specs(void) {
    static const char *convs[] = {"vaswani",   "tensor2tensor", "fairseq",
                                  "diffusers", "gptj",          "custom"};
    static const int64_t widths[] = {1, 2, 3, 7, 64, 65};
    static const int64_t offs[] = {0, -3, 1000003};
    for (int c = 0; c < 6; c++) {
        for (int w = 0; w < 6; w++) {
            int64_t d = widths[w];
            if (d % 2 && strcmp(convs[c], "gptj") == 0)
                continue; /* gptj is defined for even widths only */
            for (int dt = 0; dt < 4; dt++) {
                for (int o = 0; o < 3; o++) {
                    one_spec("spec", convs[c], dt, d, 5, offs[o]);
                    one_spec("spec", convs[c], dt, d, 300, offs[o]);
                }
                one_spec("spec_add", convs[c], dt, d, 5, -1);
                if (dt < 2)
                    one_spec("spec_positions", convs[c], dt, d, 40, 2);
            }
        }
    }
}

/* RoPE, through a handle made from nf frequencies w_i = 1 / (1 + i^2) (exact
 * divisions: NumPy gets the same doubles) and an attention factor (the base
 * field of the line).  rope_cache: cos then sin of S rows; rope_bshd / rope_bhsd:
 * x (2 sequences, 3 heads, head_dim 2nf + 2: the last two entries are not
 * rotated) rotated in place.  The _positions kinds take explicit positions
 * (per sequence for the rotations) around offset instead of offset + s. */
static int64_t rope_pos(int64_t off, int64_t b, int64_t s) {
    return off + 3 * b + (37 * s) % 11 - 5;
}

static int run_rope(const char *kind, const fastpe_rope *h, int dt, int lay, int64_t nf, int64_t S,
                    int64_t off, int nt, void *buf, const int64_t *pos) {
    const int64_t W = 2 * nf, B = 2, H = 3, D = 2 * nf + 2;
    const int64_t *p = strstr(kind, "_positions") != NULL ? pos : NULL;
    if (strncmp(kind, "rope_cache", 10) == 0) {
        char *c = (char *)buf, *sn = c + (size_t)(S * W) * ITEM[dt];
        switch (dt) {
        case 0:
            return fastpe_rope_cache_f32(h, (float *)c, (float *)sn, S, W, p, off, lay, nt);
        case 1:
            return fastpe_rope_cache_f64(h, (double *)c, (double *)sn, S, W, p, off, lay, nt);
        case 2:
            return fastpe_rope_cache_f16(h, (uint16_t *)c, (uint16_t *)sn, S, W, p, off, lay, nt);
        default:
            return fastpe_rope_cache_bf16(h, (uint16_t *)c, (uint16_t *)sn, S, W, p, off, lay, nt);
        }
    }
    int64_t sb = S * H * D, ss = H * D, sh = D; /* (batch, seq, heads, head_dim) */
    if (strncmp(kind, "rope_bhsd", 9) == 0)
        ss = D, sh = S * D; /* (batch, heads, seq, head_dim) */
    x_init(buf, dt, (size_t)(B * S * H * D));
    switch (dt) {
    case 0:
        return fastpe_rope_apply_f32(h, (float *)buf, B, S, H, sb, ss, sh, p, off, lay, nt);
    case 1:
        return fastpe_rope_apply_f64(h, (double *)buf, B, S, H, sb, ss, sh, p, off, lay, nt);
    case 2:
        return fastpe_rope_apply_f16(h, (uint16_t *)buf, B, S, H, sb, ss, sh, p, off, lay, nt);
    default:
        return fastpe_rope_apply_bf16(h, (uint16_t *)buf, B, S, H, sb, ss, sh, p, off, lay, nt);
    }
}

/* A RoPE digest's line, once the three thread counts agree (else a failure). */
static void emit_rope(const char *kind, int dt, int lay, int64_t nf, int64_t S, int64_t off,
                      double attention, const uint64_t hs[3]) {
    char line[512];
    if (hs[0] != hs[1] || hs[0] != hs[2]) {
        fprintf(stderr, "thread counts disagree: %s %s nf=%" PRId64 " S=%" PRId64 "\n", kind,
                DTYPES[dt], nf, S);
        failures++;
    }
    snprintf(line, sizeof(line),
             "%s %s %s %" PRId64 " %" PRId64 " %" PRId64 " %.17g %016" PRIx64 "\n", kind,
             DTYPES[dt], LAYOUTS[lay], nf, S, off, attention, hs[0]);
    emit(line);
}

static void one_rope(const char *kind, int dt, int lay, int64_t nf, int64_t S, int64_t off,
                     double attention) {
    int cache = strncmp(kind, "rope_cache", 10) == 0;
    size_t nbytes = (size_t)(cache ? 2 * S * 2 * nf : 2 * S * 3 * (2 * nf + 2)) * ITEM[dt];
    void *buf = malloc(nbytes + 8);
    int64_t *pos = (int64_t *)malloc((size_t)(2 * S) * sizeof(int64_t));
    double *w = (double *)malloc((size_t)nf * sizeof(double));
    fastpe_rope *h = NULL;
    uint64_t hs[3];
    if (buf != NULL && pos != NULL && w != NULL) {
        for (int64_t i = 0; i < nf; i++)
            w[i] = 1.0 / (double)(1 + i * i);
        h = fastpe_rope_from_frequencies(w, nf, attention);
    }
    if (h == NULL) {
        fprintf(stderr, "no RoPE handle at nf=%" PRId64 " (or out of memory)\n", nf);
        exit(2);
    }
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t s = 0; s < S; s++)
            pos[b * S + s] = rope_pos(off, cache ? 0 : b, s);
    }
    for (int nt = 1; nt <= 3; nt++) {
        int err = run_rope(kind, h, dt, lay, nf, S, off, nt, buf, pos);
        if (err != FASTPE_OK) {
            fprintf(stderr, "%s %s nf=%" PRId64 ": %s\n", kind, DTYPES[dt], nf,
                    fastpe_strerror(err));
            exit(2);
        }
        hs[nt - 1] = digest(buf, nbytes);
    }
    emit_rope(kind, dt, lay, nf, S, off, attention, hs);
    fastpe_rope_free(h);
    free(buf);
    free(pos);
    free(w);
}

static void sweep_rope(void) {
    static const int64_t nfs[] = {1, 3, 7, 32, 33};
    static const int64_t lens[] = {1, 5, 300};
    static const int64_t offs[] = {0, -37, 1000003};
    static const double attention[] = {1.0, 1.25};
    static const char *rotations[] = {"rope_bshd", "rope_bhsd"};
    for (int f = 0; f < 5; f++) {
        int64_t nf = nfs[f];
        for (int lay = 0; lay < 2; lay++) {
            for (int dt = 0; dt < 4; dt++) {
                for (int a = 0; a < 2; a++) {
                    for (int l = 0; l < 3; l++) {
                        for (int o = 0; o < 3; o++) {
                            one_rope("rope_cache", dt, lay, nf, lens[l], offs[o], attention[a]);
                            if (l > 0 && o != 1) {
                                one_rope(rotations[0], dt, lay, nf, lens[l], offs[o], attention[a]);
                                one_rope(rotations[1], dt, lay, nf, lens[l], offs[o], attention[a]);
                            }
                        }
                    }
                    one_rope("rope_cache_positions", dt, lay, nf, 40, 17, attention[a]);
                    one_rope("rope_bshd_positions", dt, lay, nf, 40, 17, attention[a]);
                    one_rope("rope_bhsd_positions", dt, lay, nf, 40, 17, attention[a]);
                }
                /* a team's worth of work (the library runs small calls on one thread) */
                if (nf >= 32) {
                    one_rope("rope_cache", dt, lay, nf, 2100, 12345, 1.25);
                    one_rope("rope_bhsd", dt, lay, nf, 700, 12345, 1.25);
                }
            }
        }
    }
}

/* RoPE handles from the rules (fastpe_rope_from_params), one model's config per
 * rope_type: the cos and sin caches of S rows at offset, as rope_cache_* (the
 * line's kind is rope_rule_<type>, d its head_dim, the base field the
 * precision's bits).  The rule sees the sequence length offset + S, as
 * fastpe.rope_cache gives it. */
static const char *RULES[6] = {"default", "linear", "dynamic", "yarn", "longrope", "llama3"};
static double short_factor[8], long_factor[8];

static int64_t rule_params(int type, int64_t seq_len, int bits, fastpe_rope_params *p) {
    int64_t head_dim = 64;
    fastpe_rope_params_init(p);
    p->rope_type = type;
    p->precision = bits == 32 ? FASTPE_PRECISION_FLOAT32 : FASTPE_PRECISION_FLOAT64;
    p->seq_len = seq_len;
    switch (type) {
    case FASTPE_ROPE_DEFAULT:
        p->rope_theta = 500000.0;
        head_dim = 128;
        break;
    case FASTPE_ROPE_LINEAR:
        p->factor = 4.0;
        p->partial_rotary_factor = 0.5;
        head_dim = 96;
        break;
    case FASTPE_ROPE_DYNAMIC:
        p->factor = 2.0;
        p->max_position_embeddings = 64;
        break;
    case FASTPE_ROPE_YARN: /* DeepSeek's: an attention factor from mscale / mscale_all_dim */
        p->factor = 40.0;
        p->original_max_position_embeddings = 4096;
        p->mscale = 0.707;
        p->mscale_all_dim = 1.0;
        break;
    case FASTPE_ROPE_LONGROPE: /* long_factor beyond 100 positions */
        for (int i = 0; i < 8; i++) {
            short_factor[i] = 1.0 + i / 8.0;
            long_factor[i] = 1.0 + 3.0 * i;
        }
        p->short_factor = short_factor;
        p->long_factor = long_factor;
        p->short_factor_len = p->long_factor_len = 8;
        p->factor = 8.0;
        p->original_max_position_embeddings = 100;
        head_dim = 16;
        break;
    default: /* Llama 3.1's */
        p->rope_theta = 500000.0;
        p->factor = 8.0;
        p->low_freq_factor = 1.0;
        p->high_freq_factor = 4.0;
        p->original_max_position_embeddings = 8192;
        head_dim = 128;
        break;
    }
    return head_dim;
}

static void one_rule(int type, int dt, int lay, int64_t S, int64_t off, int bits) {
    fastpe_rope_params p;
    fastpe_rope *h = NULL;
    int64_t head_dim = rule_params(type, off + S, bits, &p), nf;
    int err = fastpe_rope_from_params(&p, head_dim, &h);
    size_t nbytes;
    void *buf;
    uint64_t hs[3];
    char line[512];
    if (err != FASTPE_OK) {
        fprintf(stderr, "no RoPE handle for rope_type %s: %s\n", RULES[type], fastpe_strerror(err));
        exit(2);
    }
    nf = fastpe_rope_rotary_dim(h) / 2;
    nbytes = (size_t)(2 * S * 2 * nf) * ITEM[dt];
    buf = malloc(nbytes + 8);
    if (buf == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int nt = 1; nt <= 3; nt++) {
        err = run_rope("rope_cache", h, dt, lay, nf, S, off, nt, buf, NULL);
        if (err != FASTPE_OK) {
            fprintf(stderr, "rope_rule_%s %s: %s\n", RULES[type], DTYPES[dt], fastpe_strerror(err));
            exit(2);
        }
        hs[nt - 1] = digest(buf, nbytes);
    }
    if (hs[0] != hs[1] || hs[0] != hs[2]) {
        fprintf(stderr, "thread counts disagree: rope_rule_%s %s\n", RULES[type], DTYPES[dt]);
        failures++;
    }
    snprintf(line, sizeof(line),
             "rope_rule_%s %s %s %" PRId64 " %" PRId64 " %" PRId64 " %d %016" PRIx64 "\n",
             RULES[type], DTYPES[dt], LAYOUTS[lay], head_dim, S, off, bits, hs[0]);
    emit(line);
    fastpe_rope_free(h);
    free(buf);
}

static void sweep_rules(void) {
    for (int type = 0; type < 6; type++) {
        for (int bits = 32; bits <= 64; bits += 32) {
            for (int lay = 0; lay < 2; lay++) {
                for (int dt = 0; dt < 4; dt++) {
                    one_rule(type, dt, lay, 5, 3, bits);
                    one_rule(type, dt, lay, 300, 1000, bits);
                }
            }
        }
    }
}

/* Multi-axis RoPE (fastpe_rope_section_axes + fastpe_rope_from_axes): one_rope's
 * nf frequencies split between 3 axes by sections (nf - 2(nf/3), nf/3, nf/3),
 * contiguous (kinds rope_axes_*) or interleaved (rope_axes_*_interleaved), token
 * (b, s) at axes_pos(offset, b, s, a) on axis a.  rope_axes_cache: cos then sin
 * of S tokens (b = 0); rope_axes_bshd / rope_axes_bhsd: x as in one_rope, each
 * sequence at its own positions. */
static int64_t axes_pos(int64_t off, int64_t b, int64_t s, int a) {
    return off + (37 * s + 13 * a + 5 * b) % 11 - 5 + 7 * a;
}

static int run_rope_axes(int cache, int bhsd, const fastpe_rope *h, int dt, int lay, int64_t nf,
                         int64_t S, int nt, void *buf, const int64_t *p) {
    const int64_t W = 2 * nf, B = 2, H = 3, D = 2 * nf + 2;
    if (cache) {
        char *c = (char *)buf, *sn = c + (size_t)(S * W) * ITEM[dt];
        switch (dt) {
        case 0:
            return fastpe_rope_cache_axes_f32(h, (float *)c, (float *)sn, S, W, p, lay, nt);
        case 1:
            return fastpe_rope_cache_axes_f64(h, (double *)c, (double *)sn, S, W, p, lay, nt);
        case 2:
            return fastpe_rope_cache_axes_f16(h, (uint16_t *)c, (uint16_t *)sn, S, W, p, lay, nt);
        default:
            return fastpe_rope_cache_axes_bf16(h, (uint16_t *)c, (uint16_t *)sn, S, W, p, lay, nt);
        }
    }
    int64_t sb = S * H * D, ss = H * D, sh = D; /* (batch, seq, heads, head_dim) */
    if (bhsd)
        ss = D, sh = S * D; /* (batch, heads, seq, head_dim) */
    x_init(buf, dt, (size_t)(B * S * H * D));
    switch (dt) {
    case 0:
        return fastpe_rope_apply_axes_f32(h, (float *)buf, B, S, H, sb, ss, sh, p, lay, nt);
    case 1:
        return fastpe_rope_apply_axes_f64(h, (double *)buf, B, S, H, sb, ss, sh, p, lay, nt);
    case 2:
        return fastpe_rope_apply_axes_f16(h, (uint16_t *)buf, B, S, H, sb, ss, sh, p, lay, nt);
    default:
        return fastpe_rope_apply_axes_bf16(h, (uint16_t *)buf, B, S, H, sb, ss, sh, p, lay, nt);
    }
}

static void one_rope_axes(const char *what, int slay, int dt, int lay, int64_t nf, int64_t S,
                          int64_t off, double attention) {
    int cache = strcmp(what, "cache") == 0, bhsd = strcmp(what, "bhsd") == 0;
    size_t nbytes = (size_t)(cache ? 2 * S * 2 * nf : 2 * S * 3 * (2 * nf + 2)) * ITEM[dt];
    void *buf = malloc(nbytes + 8);
    int64_t *pos = (int64_t *)malloc((size_t)(2 * S * 3) * sizeof(int64_t));
    double *w = (double *)malloc((size_t)nf * sizeof(double));
    int32_t *axis = (int32_t *)malloc((size_t)nf * sizeof(int32_t));
    const int64_t sections[3] = {nf - 2 * (nf / 3), nf / 3, nf / 3};
    fastpe_rope *h = NULL;
    uint64_t hs[3];
    char kind[64];
    snprintf(kind, sizeof(kind), "rope_axes_%s%s", what, slay ? "_interleaved" : "");
    if (buf != NULL && pos != NULL && w != NULL && axis != NULL &&
        fastpe_rope_section_axes(sections, 3, slay, axis, nf) == FASTPE_OK) {
        for (int64_t i = 0; i < nf; i++)
            w[i] = 1.0 / (double)(1 + i * i);
        h = fastpe_rope_from_axes(w, nf, axis, 3, attention);
    }
    if (h == NULL) {
        fprintf(stderr, "no multi-axis RoPE handle at nf=%" PRId64 " (or out of memory)\n", nf);
        exit(2);
    }
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t s = 0; s < S; s++) {
            for (int a = 0; a < 3; a++)
                pos[(b * S + s) * 3 + a] = axes_pos(off, cache ? 0 : b, s, a);
        }
    }
    for (int nt = 1; nt <= 3; nt++) {
        int err = run_rope_axes(cache, bhsd, h, dt, lay, nf, S, nt, buf, pos);
        if (err != FASTPE_OK) {
            fprintf(stderr, "%s %s nf=%" PRId64 ": %s\n", kind, DTYPES[dt], nf,
                    fastpe_strerror(err));
            exit(2);
        }
        hs[nt - 1] = digest(buf, nbytes);
    }
    emit_rope(kind, dt, lay, nf, S, off, attention, hs);
    fastpe_rope_free(h);
    free(buf);
    free(pos);
    free(w);
    free(axis);
}

static void sweep_rope_axes(void) {
    static const int64_t nfs[] = {1, 3, 7, 32, 33};
    for (int f = 0; f < 5; f++) {
        int64_t nf = nfs[f];
        for (int slay = 0; slay < 2; slay++) {
            for (int lay = 0; lay < 2; lay++) {
                for (int dt = 0; dt < 4; dt++) {
                    one_rope_axes("cache", slay, dt, lay, nf, 1, 1000003, 1.0);
                    one_rope_axes("cache", slay, dt, lay, nf, 5, -37, 1.25);
                    one_rope_axes("cache", slay, dt, lay, nf, 300, 0, 1.0);
                    one_rope_axes("bshd", slay, dt, lay, nf, 5, 1000003, 1.25);
                    one_rope_axes("bhsd", slay, dt, lay, nf, 300, -37, 1.0);
                    /* a team's worth of work (the library runs small calls on one thread) */
                    if (nf >= 32 && dt < 2) {
                        one_rope_axes("cache", slay, dt, lay, nf, 2100, 12345, 1.25);
                        one_rope_axes("bhsd", slay, dt, lay, nf, 700, 12345, 1.0);
                    }
                }
            }
        }
    }
}

int main(int argc, char **argv) {
    static const int64_t widths[] = {1, 2, 3, 7, 64, 65, 257};
    static const int64_t lens[] = {1, 5, 300};
    const int nw = (int)(sizeof(widths) / sizeof(widths[0]));
    if (argc > 1) {
        expected = fopen(argv[1], "r");
        if (expected == NULL) {
            fprintf(stderr, "cannot open %s\n", argv[1]);
            return 2;
        }
    }
    for (int w = 0; w < nw; w++) {
        int64_t d = widths[w];
        int64_t near = limit_offset(d, 10000.0);
        for (int lay = 0; lay < 2; lay++) {
            for (int dt = 0; dt < 4; dt++) {
                for (int l = 0; l < 3; l++) {
                    int64_t S = lens[l];
                    const int64_t offs[4] = {0, -37, 1000003, near - S + 1};
                    for (int o = 0; o < 4; o++)
                        one("fill", dt, lay, d, S, offs[o], 10000.0);
                    one("fill", dt, lay, d, S, -near, 10000.0);
                    if (l > 0) {
                        one("add", dt, lay, d, S, 0, 10000.0);
                        one("add", dt, lay, d, S, -37, 10000.0);
                    }
                }
                /* a team's worth of work (the library runs small fills on one thread) */
                if (d >= 64)
                    one("fill", dt, lay, d, 2100, 12345, 10000.0);
                if (dt < 2) {
                    one("positions", dt, lay, d, 300, -11, 10000.0);
                    one("add_positions", dt, lay, d, 300, 7, 10000.0);
                    one("fill", dt, lay, d, 300, 5, 100.0);
                }
            }
        }
    }
    sweep_specs();
    sweep_rope();
    sweep_rules();
    sweep_rope_axes();
    if (expected != NULL) {
        char extra[512];
        if (fgets(extra, sizeof(extra), expected) != NULL) {
            fprintf(stderr, "the committed file has more lines than the sweep\n");
            failures++;
        }
        fclose(expected);
        if (failures) {
            fprintf(stderr, "%d digests differ\n", failures);
            return 1;
        }
        printf("all digests match\n");
    }
    return 0;
}
