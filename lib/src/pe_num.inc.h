/*
 * The arithmetic a formula written once is compiled with (rope_formula.inc.c,
 * rope_presets_formula.inc.c): double-double, the fast evaluation, or, where
 * PE_NUM_MP is defined, 256-bit numbers (pe_mp.h), the exact path.  Included
 * before the formula, beside the formula's own macros (its error bound); the
 * formula's end includes pe_num_end.inc.h.
 */
#ifdef PE_NUM_MP
#define NUM      pe_mp
#define FN(name) mp_##name
#define N_FROM   pe_mp_from
#define N_ADD    pe_mp_add
#define N_NEG    pe_mp_neg
#define N_MUL    pe_mp_mul
#define N_DIV    pe_mp_div
#define N_HI     pe_mp_to_double
#define N_EXP    pe_mp_exp
#define N_LOG    pe_mp_log
#define N_PI     pe_mp_pi()
#else
#define NUM      pe_dd
#define FN(name) dd_##name
#define N_FROM   pe_dd_from
#define N_ADD    pe_dd_add
#define N_NEG    pe_dd_neg
#define N_MUL    pe_dd_mul
#define N_DIV    pe_dd_div
#define N_HI(a)  ((a).hi)
#define N_EXP    pe_dd_exp
#define N_LOG    pe_log_dd
#define N_PI     pe_dd_add(pe_dd_from(2.0 * PE_PIO2_HI), pe_dd_from(2.0 * PE_PIO2_LO))
#endif
