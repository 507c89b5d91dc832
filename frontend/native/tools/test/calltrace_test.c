/*
 * calltrace's unit test: a program linked against calltrace's libcuda.so.1 wrapping fake_driver.c.
 * Every call must give what the fake gives when called directly (dlopen'd by path), through an
 * exported symbol, a cuGetProcAddress answer and a private-table slot; the log is checked by the
 * JUnit side (CallTraceTest). Prints PASS last.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*many_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                       uint64_t, uint64_t, uint64_t);
typedef int (*mixed_fn)(int, float, uint64_t, double, float, double, double, double, double, double, double, int);
typedef int (*out_fn)(int *, int);
typedef int (*gpa_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*table_fn)(const void **, const void *);
typedef uint64_t (*slot_fn)(uint64_t, uint64_t);

static int failures;

#define CHECK(cond, ...)                          \
    do {                                          \
        if (!(cond)) {                            \
            printf("FAIL: " __VA_ARGS__);         \
            printf("\n");                         \
            failures++;                           \
        }                                         \
    } while (0)

static void exercise(const char *how, many_fn many, mixed_fn mixed, out_fn out, many_fn many_ref, mixed_fn mixed_ref) {
    int want = many_ref(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    int got = many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    CHECK(got == want, "%s: cuFakeMany = %d, directly %d", how, got, want);
    want = mixed_ref(3, 1.5f, 7, 2.25, -0.5f, 4.0, 1.0, 2.0, 3.0, 5.0, 8.0, 11);
    got = mixed(3, 1.5f, 7, 2.25, -0.5f, 4.0, 1.0, 2.0, 3.0, 5.0, 8.0, 11);
    CHECK(got == want, "%s: cuFakeMixed = %d, directly %d", how, got, want);
    int v = 0;
    CHECK(out(&v, 21) == 0 && v == 42, "%s: cuFakeOut wrote %d", how, v);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: calltrace_test FAKE_DRIVER\n");
        return 2;
    }
    void *fake = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *traced = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (fake == NULL || traced == NULL) {
        printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    many_fn many_ref = (many_fn) dlsym(fake, "cuFakeMany");
    mixed_fn mixed_ref = (mixed_fn) dlsym(fake, "cuFakeMixed");
    CHECK(dlsym(traced, "cuFakeMany") != (void *) many_ref, "calltrace's symbol is the fake's own");
    exercise("symbols", (many_fn) dlsym(traced, "cuFakeMany"), (mixed_fn) dlsym(traced, "cuFakeMixed"),
             (out_fn) dlsym(traced, "cuFakeOut"), many_ref, mixed_ref);

    gpa_fn gpa = (gpa_fn) dlsym(traced, "cuGetProcAddress_v2");
    void *many = NULL, *mixed = NULL, *out = NULL, *self = NULL, *none = (void *) 1;
    int status = -1;
    CHECK(gpa("cuFakeMany", &many, 12000, 0, &status) == 0 && status == 0, "cuGetProcAddress_v2(cuFakeMany)");
    gpa("cuFakeMixed", &mixed, 12000, 0, NULL);
    gpa("cuFakeOut", &out, 12000, 0, NULL);
    CHECK(many != NULL && many != (void *) many_ref, "cuGetProcAddress_v2 handed out the fake's own function");
    if (many != NULL && mixed != NULL && out != NULL) {
        exercise("cuGetProcAddress", (many_fn) many, (mixed_fn) mixed, (out_fn) out, many_ref, mixed_ref);
    }
    /* cuGetProcAddress asked for itself answers calltrace's, which hands out wrapped functions */
    void *again = NULL;
    CHECK(gpa("cuGetProcAddress", &self, 12000, 0, NULL) == 0 && self != NULL, "cuGetProcAddress of itself");
    CHECK(self != NULL && ((gpa_fn) self)("cuFakeMany", &again, 12000, 0, NULL) == 0 && again != NULL
              && again != (void *) many_ref, "cuGetProcAddress of itself is the fake's own");
    CHECK(gpa("cuNoSuchFunction", &none, 12000, 0, &status) == 500 && none == NULL && status == 1,
          "an unknown name: pointer %p status %d", none, status);

    table_fn get_table = (table_fn) dlsym(traced, "cuGetExportTable");
    static const unsigned char id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    const void **table = NULL;
    CHECK(get_table((const void **) &table, id) == 0 && table != NULL, "cuGetExportTable");
    if (table != NULL) {
        CHECK((uintptr_t) table[0] == 2 * sizeof(void *), "the table's size word is %p", table[0]);
        CHECK(((slot_fn) table[1])(7, 9) == 7009, "slot 1 through calltrace");
    }
    printf("%s\n", failures == 0 ? "PASS" : "FAILED");
    return failures == 0 ? 0 : 1;
}
