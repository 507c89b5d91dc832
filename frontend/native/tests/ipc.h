/*
 * Helpers of the two-process sharing programs (ipc_memory, ipc_shareable): whole reads and writes on a
 * pipe or socket, the child's environment overrides, and waiting for the child. Include it instead of
 * common.h (it includes it, after asking for the BSD/Linux extensions SCM_RIGHTS needs).
 *
 * The child may be made another tenant of the backend before its cuInit, from variables the test sets:
 *   IPC_CHILD_SERVER    the child's GPUSOCKETS_SERVER (e.g. the same backend over another transport, whose
 *                       peers a tenants file maps to another tenant, or another backend)
 *   IPC_CHILD_IDENTITY  the child's GPUSOCKETS_IDENTITY (a psk tenant's name)
 *   IPC_CHILD_PSK_FILE  the child's GPUSOCKETS_PSK_FILE (that tenant's key)
 * Unset, the child inherits the parent's environment (the same tenant).
 */
#ifndef GPUSOCKETS_TESTS_IPC_H
#define GPUSOCKETS_TESTS_IPC_H

#define _DEFAULT_SOURCE 1

#include "common.h"

#include <errno.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Writes all n bytes or exits 1 saying what. */
static inline void write_all(int fd, const void *p, size_t n, const char *what) {
    const char *b = p;
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            fail("writing %s failed: %s", what, strerror(errno));
        }
        b += w;
        n -= (size_t) w;
    }
}

/* Reads exactly n bytes; returns 0 at end of file before the first byte (the other process ended), exits 1 otherwise. */
static inline int read_all(int fd, void *p, size_t n, const char *what) {
    char *b = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, b + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            fail("reading %s failed: %s", what, strerror(errno));
        }
        if (r == 0) {
            if (got == 0) {
                return 0;
            }
            fail("reading %s: end of file after %zu of %zu bytes", what, got, n);
        }
        got += (size_t) r;
    }
    return 1;
}

/* In the child, before its first CUDA call: applies IPC_CHILD_* (above) and says on stderr which it applied. */
static inline void apply_child_environment(void) {
    static const char *const vars[][2] = {
        {"IPC_CHILD_SERVER", "GPUSOCKETS_SERVER"},
        {"IPC_CHILD_IDENTITY", "GPUSOCKETS_IDENTITY"},
        {"IPC_CHILD_PSK_FILE", "GPUSOCKETS_PSK_FILE"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i][0]);
        if (v != NULL && v[0] != 0) {
            if (setenv(vars[i][1], v, 1) != 0) {
                fail("setenv %s failed: %s", vars[i][1], strerror(errno));
            }
            fprintf(stderr, "child: %s=%s (from %s)\n", vars[i][1], v, vars[i][0]);
        }
    }
}

/* Waits for the child; returns its exit status, or 128 + the signal that ended it. */
static inline int wait_child(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fail("waitpid failed: %s", strerror(errno));
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The program's one argument: none, or --expect-refused (the child is another tenant). */
static inline int expect_refused_arg(int argc, char **argv, const char *usage) {
    usage_if(argc > 2 || (argc == 2 && strcmp(argv[1], "--expect-refused") != 0), usage);
    return argc == 2;
}

#endif
