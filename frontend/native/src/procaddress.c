/*
 * cuGetProcAddress answers by name, requested CUDA version and flags, as the real driver does:
 * of the symbols serving a cuda.h name, the newest one whose version is at most the requested
 * one; its per-thread-default-stream variant when the flags ask for it. Needs no JVM.
 */
#include "gpusockets.h"
#include "procaddress_variants.h"

#include <stdio.h>
#include <string.h>

/* The per-thread-default-stream variants (_ptsz/_ptds) came with CUDA 7.0: the driver answers a
 * per-thread request at an older version "version not sufficient" (seen on driver 580). */
#define GPUS_PER_THREAD_SINCE 7000

/* For a request of `name` at `version`: the version of the ABI variant it gets (the newest
 * cudaTypedefs.h lists not above it) in *chosen, and the name's oldest listed variant in *first;
 * 0 where none is listed. */
static void variants(const char *name, int version, int *chosen, int *first) {
    *chosen = 0;
    *first = 0;
    for (size_t i = 0; i < sizeof gpus_variants / sizeof gpus_variants[0]; i++) {
        int v = gpus_variants[i].version;
        if (strcmp(gpus_variants[i].name, name) != 0) {
            continue;
        }
        if (*first == 0 || v < *first) {
            *first = v;
        }
        if (v <= version && v > *chosen) {
            *chosen = v;
        }
    }
}

GPUS_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags, int *symbolStatus);
GPUS_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
GPUS_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const void *pExportTableId);

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, int *status) {
    if (symbol == NULL || pfn == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pfn = NULL;
    int found = 0, status_value = GPUS_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        /* before 12.0 the 4-argument form: handing out _v2 would write through a fifth argument never passed */
        *pfn = cudaVersion >= 12000 ? (void *) cuGetProcAddress_v2 : (void *) cuGetProcAddress;
        found = 1;
    } else if (strcmp(symbol, "cuGetExportTable") == 0) {
        /* hand-written (export_tables.c), as cuGetProcAddress itself; the driver has it since 3.0 */
        found = cudaVersion >= 3000;
        *pfn = found ? (void *) cuGetExportTable : NULL;
        status_value = GPUS_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (!found) {
            if (status != NULL) {
                *status = status_value;
            }
            return CUDA_ERROR_NOT_FOUND;
        }
    }
    for (const struct gpus_symbol *s = gpus_profiler_symbols; !found && s->name != NULL; s++) {
        /* cudaProfiler.h's calls, hand-written in profiler.c (no per-thread variants) */
        if (strcmp(s->name, symbol) == 0) {
            found = cudaVersion >= s->since;
            *pfn = found ? s->address : NULL;
            if (status != NULL) {
                *status = found ? GPUS_PROC_ADDRESS_SUCCESS : GPUS_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
            }
            return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
        }
    }
    const struct gpus_symbol *best = NULL;
    for (const struct gpus_symbol *s = gpus_symbols; !found && s->name != NULL; s++) {
        if (strcmp(s->name, symbol) != 0 || s->per_thread) {
            continue;
        }
        status_value = GPUS_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        if (s->since <= cudaVersion && (best == NULL || s->since > best->since)) {
            best = s;
        }
    }
    int chosen = 0, first = 0;
    if (best != NULL) {
        variants(symbol, cudaVersion, &chosen, &first);
    }
    /* a symbol exported since 0 is the name's first variant */
    if (best != NULL && chosen > (best->since == 0 ? first : best->since)) {
        best = NULL; /* the request's ABI is a newer variant than any this library exports: not an older one */
        status_value = GPUS_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    if (best != NULL) {
        *pfn = best->address;
        found = 1;
        if (flags & GPUS_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
            /* the per-thread variant of the newest symbol, if cuda.h defines one: exactly that symbol
             * plus _ptsz or _ptds (a longer name that starts with it, e.g. NAME_v2_ptsz, is not it) */
            size_t n = strlen(best->symbol);
            for (const struct gpus_symbol *s = gpus_symbols; s->name != NULL; s++) {
                if (s->per_thread && strncmp(s->symbol, best->symbol, n) == 0
                    && (strcmp(s->symbol + n, "_ptsz") == 0 || strcmp(s->symbol + n, "_ptds") == 0)) {
                    if (cudaVersion < GPUS_PER_THREAD_SINCE) {
                        *pfn = NULL; /* as the driver answers: success, "version not sufficient", no pointer */
                        if (status != NULL) {
                            *status = GPUS_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
                        }
                        return CUDA_SUCCESS;
                    }
                    *pfn = s->address;
                }
            }
        }
    }
    if (status != NULL) {
        *status = found ? GPUS_PROC_ADDRESS_SUCCESS : status_value;
    }
    return found ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* GPUSOCKETS_TRACE=1: one line per request, with what it got. */
static CUresult traced(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags, int *status) {
    int st = -1;
    CUresult r = lookup(symbol, pfn, cudaVersion, flags, status != NULL ? status : &st);
    if (gpus_tracing()) {
        const char *answer = "(none)";
        if (r == CUDA_SUCCESS && pfn != NULL && *pfn != NULL) {
            for (const struct gpus_symbol *s = gpus_symbols; s->name != NULL; s++) {
                if (s->address == *pfn) {
                    answer = s->symbol;
                }
            }
            for (const struct gpus_symbol *s = gpus_profiler_symbols; s->name != NULL; s++) {
                if (s->address == *pfn) {
                    answer = s->symbol;
                }
            }
            if (*pfn == (void *) cuGetProcAddress_v2) {
                answer = "cuGetProcAddress_v2";
            } else if (*pfn == (void *) cuGetProcAddress) {
                answer = "cuGetProcAddress";
            }
        }
        gpus_trace("cuGetProcAddress(%s, %d, %llu) -> %d, status %d, %s", symbol ? symbol : "(null)", cudaVersion,
                   (unsigned long long) flags, r, status != NULL ? *status : st, answer);
    }
    return r;
}

GPUS_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags, int *symbolStatus) {
    return traced(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* The CUDA 11.3 form, without the status output. */
GPUS_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    return traced(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult gpus_not_forwarded(int index) {
    static unsigned char said[1024];
    if (index < 0 || index >= gpus_not_forwarded_count) {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    const struct gpus_not_forwarded_entry *e = &gpus_not_forwarded_entries[index];
    if (index >= (int) sizeof said || !__atomic_exchange_n(&said[index], 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets: %s is not forwarded (%s); it returns error %d\n", e->name, e->reason, e->error);
    }
    gpus_trace("%s -> %d (not forwarded)", e->name, e->error);
    return e->error;
}
