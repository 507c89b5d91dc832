/*
 * check: our libcuda.so.1's cuGetProcAddress against the real driver's answers (driver580-*-answers.txt,
 * see README.md). For every request the real driver answered with a symbol and ours answers at all,
 * the symbol ours returns (dladdr) must be the same ABI variant. A request ours does not answer is
 * counted, not an error, for a name ours does not implement (not forwarded); for a name ours answers
 * at 13000 it is an error ("MISSING": a variant the table lacks, e.g. an older symbol) in the files
 * after the option --missing-is-error (cudart's own requests; the typedef files also hold the
 * pre-3.2 ABIs with 32-bit pointers and sizes, which no program built today asks for). Prints
 * "DIFF ..."/"MISSING ..." per mismatch and one summary line
 * "answered A same S different D real-only R missing M"; exit 1 on any difference or missing
 * variant. Needs no backend.
 *   gcc -I/usr/local/cuda/include check.c -o check -L LIBDIR -l:libcuda.so.1 -ldl
 *   ./check TYPEDEF-ANSWERS... --missing-is-error CUDART-ANSWERS...
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int answered = 0, same = 0, different = 0, real_only = 0, missing = 0, strict = 0;
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--missing-is-error") == 0) {
            strict = 1;
            continue;
        }
        FILE *f = fopen(argv[a], "r");
        if (f == NULL) {
            perror(argv[a]);
            return 2;
        }
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char name[256], real[300];
            int version, result, status;
            unsigned long long flags;
            if (sscanf(line, "%255s %d %llu %d %d %299s", name, &version, &flags, &result, &status, real) != 6) {
                continue;
            }
            void *fn = NULL;
            CUdriverProcAddressQueryResult ours = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
            CUresult r = cuGetProcAddress(name, &fn, version, flags, &ours);
            if (r != CUDA_SUCCESS || fn == NULL) {
                if (strcmp(real, "-") != 0) {
                    void *any = NULL;
                    CUdriverProcAddressQueryResult st;
                    if (strict && cuGetProcAddress(name, &any, 13000, 0, &st) == CUDA_SUCCESS && any != NULL) {
                        missing++;
                        printf("MISSING %s %d %llu: the driver answers %s, ours nothing (yet implements the name)\n", name,
                               version, flags, real);
                    } else {
                        real_only++;
                    }
                }
                continue;
            }
            answered++;
            Dl_info info;
            const char *symbol = dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "?";
            if (strcmp(symbol, real) == 0) {
                same++;
            } else {
                different++;
                printf("DIFF %s %d %llu: the driver answers %s, ours %s\n", name, version, flags, real, symbol);
            }
        }
        fclose(f);
    }
    printf("answered %d same %d different %d real-only %d missing %d\n", answered, same, different, real_only, missing);
    return different == 0 && missing == 0 ? 0 : 1;
}
