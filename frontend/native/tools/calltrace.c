/*
 * calltrace: a libcuda.so.1 that wraps another one (the real driver, or ours) and logs every call
 * a program makes into it, with the same lines for both, so that a native run and a remote run of
 * one program can be compared call by call (tools/README.md).
 *
 *   GPUSOCKETS_CALLTRACE_TARGET  the libcuda.so.1 to wrap (a path; required)
 *   GPUSOCKETS_CALLTRACE_OUT     the log file (default: stderr)
 *
 * What it wraps: every symbol it exports (built from the target's own export list, build.sh),
 * every function cuGetProcAddress hands out, and the slots of the private tables cuGetExportTable
 * hands out, but for the two whose addresses the integrity check hashes (CUDART_INTERFACE and
 * INTEGRITY_CHECK), which go through untouched. Each wrapped function is a thunk that takes six
 * integer registers, eight vector registers and ten stack words and passes them on unchanged, so
 * it forwards any function of up to 16 integer or floating-point arguments exactly without knowing
 * its signature, then logs one line:
 *
 *   #SEQ TID NAME(A0, A1, A2, A3, A4, A5) = RESULT | aK=[16 bytes at AK after the call] "text" ...
 *
 * The six arguments are the integer registers: a function with fewer has leftovers there. Memory is
 * read with process_vm_readv, so a device address or a stale value is skipped, never faulted on.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "calltrace.h"

#define EXPORT __attribute__((visibility("default")))

typedef uint64_t (*forward_fn)(CT_PARAMS);

struct thunk {
    void *real;
    char name[96];
};

static struct thunk thunks[CT_THUNKS];
static int thunk_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out;
static void *target;
static atomic_ulong sequence;

/* The exported symbols' jump slots (calltrace_stubs.S) and their names (generated). */
extern void *calltrace_slots[];
extern const char *const calltrace_names[];
extern const int calltrace_name_count;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    flockfile(out);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    funlockfile(out);
    fflush(out);
    va_end(ap);
}

/* Up to n bytes at addr without faulting; how many could be read. */
static size_t peek(uint64_t addr, void *buf, size_t n) {
    if (addr < 0x10000 || addr >= 0x800000000000ull) {
        return 0;
    }
    struct iovec local = {buf, n}, remote = {(void *) (uintptr_t) addr, n};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got < 0 && n > 8) {
        return peek(addr, buf, 8); /* the last bytes of a mapping */
    }
    return got < 0 ? 0 : (size_t) got;
}

/* Appends what the argument points at: 16 bytes in hex, and the text when it is a C string. */
static void describe(char *line, size_t room, int k, uint64_t a) {
    unsigned char b[97];
    size_t n = peek(a, b, 16);
    if (n == 0) {
        return;
    }
    size_t used = strlen(line);
    used += (size_t) snprintf(line + used, room - used, " a%d=[", k);
    for (size_t i = 0; i < n && used < room; i++) {
        used += (size_t) snprintf(line + used, room - used, "%02x", b[i]);
    }
    if (used < room) {
        used += (size_t) snprintf(line + used, room - used, "]");
    }
    size_t t = peek(a, b, 96);
    size_t len = 0;
    while (len < t && b[len] >= 0x20 && b[len] < 0x7f) {
        len++;
    }
    if (len >= 3 && len < t && b[len] == 0 && used < room) {
        b[len] = 0;
        snprintf(line + used, room - used, " \"%s\"", (char *) b);
    }
}

static uint64_t forward(int i, CT_PARAMS) {
    forward_fn f = (forward_fn) thunks[i].real;
    uint64_t r = f(CT_ARGS);
    unsigned long seq = atomic_fetch_add(&sequence, 1);
    char line[1024];
    int used = snprintf(line, sizeof line, "#%lu %ld %s(0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
                        ", 0x%" PRIx64 ", 0x%" PRIx64 ") = %d |",
                        seq, (long) syscall(SYS_gettid), thunks[i].name, a0, a1, a2, a3, a4, a5, (int) r);
    if (used > 0 && (size_t) used < sizeof line) {
        uint64_t a[6] = {a0, a1, a2, a3, a4, a5};
        for (int k = 0; k < 6; k++) {
            describe(line, sizeof line, k, a[k]);
        }
    }
    say("%s", line);
    return r;
}

#include "calltrace_thunks.inc" /* generated: thunk_0 .. thunk_{CT_THUNKS-1}, each forward(i, ...) */

/* A thunk for `real` named `name` (one per address: the first name it was handed out under). */
static void *wrap(void *real, const char *name) {
    if (real == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    void *w = NULL;
    for (int i = 0; i < thunk_count && w == NULL; i++) {
        if (thunks[i].real == real) {
            w = calltrace_thunk_table[i];
        }
    }
    if (w == NULL && thunk_count < CT_THUNKS) {
        thunks[thunk_count].real = real;
        snprintf(thunks[thunk_count].name, sizeof thunks[thunk_count].name, "%s", name);
        w = calltrace_thunk_table[thunk_count++];
    }
    pthread_mutex_unlock(&lock);
    if (w == NULL) {
        say("calltrace: out of thunks; %s goes untraced", name);
        return real;
    }
    return w;
}

/* ---- the three entry points handled here ------------------------------------------------------ */

typedef int (*gpa2_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t);
typedef int (*get_table_fn)(const void **, const void *);
static gpa2_fn real_gpa2;
static gpa_fn real_gpa;
static get_table_fn real_get_table;

static int calltrace_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status);
static int calltrace_cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags);
static int calltrace_cuGetExportTable(const void **table, const void *guid);

/* What the program gets for a function the target handed out: ours for the three above. */
static void *handed_out(void *real, const char *name) {
    if (real != NULL && real == (void *) real_gpa2) {
        return (void *) calltrace_cuGetProcAddress_v2;
    }
    if (real != NULL && real == (void *) real_gpa) {
        return (void *) calltrace_cuGetProcAddress;
    }
    if (real != NULL && real == (void *) real_get_table) {
        return (void *) calltrace_cuGetExportTable;
    }
    return wrap(real, name);
}

/* The file name of the library (or program) that holds `address`, for "who asked". */
static const char *holder(void *address) {
    Dl_info info;
    if (address == NULL || dladdr(address, &info) == 0 || info.dli_fname == NULL) {
        return "?";
    }
    const char *slash = strrchr(info.dli_fname, '/');
    return slash != NULL ? slash + 1 : info.dli_fname;
}

static int lookup(const char *symbol, void **pfn, int version, uint64_t flags, int *status, int v2, void *caller) {
    int st = -1;
    int r = v2 ? real_gpa2(symbol, pfn, version, flags, status != NULL ? status : &st)
               : real_gpa(symbol, pfn, version, flags);
    void *got = r == 0 && pfn != NULL ? *pfn : NULL;
    say("#%lu %ld cuGetProcAddress%s(%s, %d, %" PRIu64 ") = %d status %d %s [%s]", atomic_fetch_add(&sequence, 1),
        (long) syscall(SYS_gettid), v2 ? "_v2" : "", symbol != NULL ? symbol : "(null)", version, flags, r,
        status != NULL ? *status : st, got != NULL ? "found" : "(none)", holder(caller));
    if (got != NULL) {
        char name[96];
        snprintf(name, sizeof name, "%s@%d%s", symbol, version, (flags & 2) ? "/pt" : "");
        *pfn = handed_out(got, name);
    }
    return r;
}

static int calltrace_cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    return lookup(symbol, pfn, version, flags, status, 1, __builtin_return_address(0));
}

static int calltrace_cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return lookup(symbol, pfn, version, flags, NULL, 0, __builtin_return_address(0));
}

/* Tables whose addresses the integrity check hashes: handed out as they are. */
static const unsigned char untouched[][16] = {
    {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9},
    {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2},
};
/* CONTEXT_LOCAL_STORAGE_V0301: four slots and no size word. */
static const unsigned char no_size_word[16] = {0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11,
                                               0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93};
#define MAX_TABLES 32
#define MAX_SLOTS 256
/* Words copied past a table's announced end, untraced, for callers that read further (their
 * values as the target has them). */
#define SPARE_SLOTS 32

static struct {
    unsigned char guid[16];
    const void *real;
    void *copy[MAX_SLOTS + SPARE_SLOTS];
} tables[MAX_TABLES];
static int table_count;

static const void *wrapped_table(const unsigned char *guid, const void *real) {
    char id[33];
    for (int i = 0; i < 16; i++) {
        snprintf(id + 2 * i, 3, "%02x", guid[i]);
    }
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++) {
        if (memcmp(guid, untouched[i], 16) == 0) {
            return real;
        }
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < table_count; i++) {
        if (memcmp(tables[i].guid, guid, 16) == 0 && tables[i].real == real) {
            pthread_mutex_unlock(&lock);
            return tables[i].copy;
        }
    }
    pthread_mutex_unlock(&lock);
    uint64_t first = 0;
    if (peek((uint64_t) (uintptr_t) real, &first, 8) != 8) {
        return real;
    }
    int slots, from;
    if (memcmp(guid, no_size_word, 16) == 0) {
        slots = 4;
        from = 0;
    } else if (first >= 8 && first % 8 == 0 && first / 8 <= MAX_SLOTS) {
        slots = (int) (first / 8);
        from = 1;
    } else {
        say("calltrace: table %s has no size word (first word 0x%" PRIx64 "); handed out untraced", id, first);
        return real;
    }
    if (table_count == MAX_TABLES) {
        return real;
    }
    int t = table_count;
    memcpy(tables[t].guid, guid, 16);
    tables[t].real = real;
    size_t got = peek((uint64_t) (uintptr_t) real, tables[t].copy, sizeof(void *) * (size_t) (slots + SPARE_SLOTS));
    if (got < sizeof(void *) * (size_t) slots) {
        return real;
    }
    for (int s = from; s < slots; s++) {
        char name[96];
        snprintf(name, sizeof name, "table %.8s[%d]", id, s);
        tables[t].copy[s] = wrap(tables[t].copy[s], name);
    }
    pthread_mutex_lock(&lock);
    table_count++;
    pthread_mutex_unlock(&lock);
    return tables[t].copy;
}

static int calltrace_cuGetExportTable(const void **table, const void *guid) {
    int r = real_get_table(table, guid);
    unsigned char g[16] = {0};
    if (guid != NULL) {
        peek((uint64_t) (uintptr_t) guid, g, 16);
    }
    char id[33];
    for (int i = 0; i < 16; i++) {
        snprintf(id + 2 * i, 3, "%02x", g[i]);
    }
    uint64_t first = 0;
    if (r == 0 && table != NULL && *table != NULL) {
        peek((uint64_t) (uintptr_t) *table, &first, 8);
    }
    say("#%lu %ld cuGetExportTable(%s) = %d first word 0x%" PRIx64 " [%s]", atomic_fetch_add(&sequence, 1),
        (long) syscall(SYS_gettid), id, r, first, holder(__builtin_return_address(0)));
    if (r == 0 && table != NULL && *table != NULL && guid != NULL) {
        *table = wrapped_table(g, *table);
    }
    return r;
}

/* Exported symbols the target lacks: an error and a line, rather than a jump to NULL. */
static int missing(void) {
    say("calltrace: a symbol the target does not export was called; it returns CUDA_ERROR_NOT_FOUND (500)");
    return 500;
}

__attribute__((constructor)) static void start(void) {
    const char *path = getenv("GPUSOCKETS_CALLTRACE_TARGET");
    const char *log = getenv("GPUSOCKETS_CALLTRACE_OUT");
    out = stderr;
    if (log != NULL && *log) {
        FILE *f = fopen(log, "a");
        if (f == NULL) {
            fprintf(stderr, "calltrace: cannot open %s; logging to stderr\n", log);
        } else {
            out = f;
        }
    }
    if (path == NULL || *path == 0) {
        fprintf(stderr, "calltrace: GPUSOCKETS_CALLTRACE_TARGET is not set (the libcuda.so.1 to wrap, a path)\n");
        abort();
    }
    target = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (target == NULL) {
        fprintf(stderr, "calltrace: cannot load %s: %s\n", path, dlerror());
        abort();
    }
    real_gpa2 = (gpa2_fn) dlsym(target, "cuGetProcAddress_v2");
    real_gpa = (gpa_fn) dlsym(target, "cuGetProcAddress");
    real_get_table = (get_table_fn) dlsym(target, "cuGetExportTable");
    if (real_gpa2 == NULL || real_gpa == NULL || real_get_table == NULL) {
        fprintf(stderr, "calltrace: %s lacks cuGetProcAddress_v2, cuGetProcAddress or cuGetExportTable\n", path);
        abort();
    }
    say("calltrace: wrapping %s", path);
    for (int i = 0; i < calltrace_name_count; i++) {
        void *real = dlsym(target, calltrace_names[i]);
        calltrace_slots[i] = real == NULL ? (void *) missing : handed_out(real, calltrace_names[i]);
    }
}
