/* calltrace: the thunks' signature. Six integer registers, eight vector registers and ten stack
 * words (System V x86-64): enough to pass any call of up to 16 integer or floating-point arguments
 * on unchanged, since a callee ignores registers and stack words it does not take. */
#ifndef CALLTRACE_H
#define CALLTRACE_H
#include <stdint.h>

#define CT_THUNKS 4096
#define CT_PARAMS                                                                                           \
    uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, double x0, double x1,    \
        double x2, double x3, double x4, double x5, double x6, double x7, uint64_t s0, uint64_t s1,          \
        uint64_t s2, uint64_t s3, uint64_t s4, uint64_t s5, uint64_t s6, uint64_t s7, uint64_t s8, uint64_t s9
#define CT_ARGS a0, a1, a2, a3, a4, a5, x0, x1, x2, x3, x4, x5, x6, x7, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9

#endif
