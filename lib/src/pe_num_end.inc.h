/* The end of pe_num.inc.h's arithmetic (included at a formula's end). */
#undef NUM
#undef FN
#undef N_FROM
#undef N_ADD
#undef N_NEG
#undef N_MUL
#undef N_DIV
#undef N_HI
#undef N_EXP
#undef N_LOG
#undef N_PI
#undef PE_NUM_MP
