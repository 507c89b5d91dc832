/*
 * Starts the embedded JVM on first use and receives the table of FFM upcall stubs, one per API
 * table entry (io.gpusockets.frontend.NativeEntry.install). The JVM starts on a pthread of its own
 * (the program's thread may have a small stack), with -Xrs so that it leaves the program's signal
 * handling alone. Native threads attach themselves on their first upcall (FFM does that).
 *
 * Where things are: GPUSOCKETS_JAVA_HOME (a runtime with lib/server/libjvm.so) and
 * GPUSOCKETS_CLASSPATH (':'-separated) when set; otherwise, for PREFIX/lib/libcuda.so.1,
 * PREFIX/runtime and every PREFIX/lib/NAME.jar (the layout of scripts/install-frontend and the bundle).
 * The JVM starts from PREFIX/lib/gpusockets.jsa (a CDS archive) when it exists; one made for other
 * jars or another runtime is skipped quietly. GPUSOCKETS_TRACE_STARTUP=1 makes cuInit print one line
 * saying where the start went (StartupTrace.java); GPUSOCKETS_EARLY_START=1 makes the library's
 * constructor begin all of it on a detached thread (start_early()), with the first calls' stubs. When GPUSOCKETS_SERVER names a unix:// or ring://
 * socket that does not exist, cuInit fails at once without the JVM (probe(), frontend/README.md).
 *
 * PREFIX/lib/gpusockets.aot, a JDK 25 AOT cache (-XX:AOTCache, JEP 483/514/515), is taken instead
 * when it exists; nothing makes one by default. GPUSOCKETS_AOT_RECORD=FILE records an AOT
 * configuration of a real program's run (-XX:AOTMode=record) for `java -XX:AOTMode=create`
 * (frontend/README.md). Recording from this embedded JVM used to produce nothing: the JVM writes the
 * configuration (classes, method profiles) on its own exit path (DestroyJavaVM, System.exit), which
 * a C program's exit() never takes; at_exit() now calls DestroyJavaVM when recording. Measured
 * (2-core box at load ~9, startup_driver.c over unix, 8 interleaved runs, process CPU time medians,
 * since wall times swung 0.6-5 s with the load): CDS archive trained by NativeTraining 0.41 s, VmHWM
 * 58.6 MB; AOT cache trained by NativeTraining 0.435 s, 58.3 MB; AOT cache recorded from the program
 * itself 0.39 s, 54.2 MB. Within the noise of that box for time, so install-frontend keeps making
 * the CDS archive.
 */
#define _GNU_SOURCE
#include "gpusockets.h"

#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <jni.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define GPUS_MAX_FUNCTIONS 4096
#define GPUS_JVM_STACK (8u << 20)

static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
/* upcall stubs by table index, made on first use by the resolver (slot 0 of the table Java fills) */
static void *upcalls[GPUS_MAX_FUNCTIONS];
typedef void *(*resolve_fn)(int index);
static resolve_fn resolve;
static int booted;
/* Set by probe() below: the backend named cannot be there. cuInit then answers CUDA_ERROR_NO_DEVICE
 * with the message the frontend would print, without the JVM; any other call starts the JVM, told
 * (-Dgpusockets.frontend.unreachable) to answer as after a failed connect without connecting. */
static int unreachable;
static int boot_started; /* boot() has begun: the probe no longer runs */

/* At the program's exit: the resolver's entry -1 (NativeEntry), which ends a resumable session with
 * GOODBYE, so that the backend does not keep it waiting for a resume that cannot come. */
static JavaVM *recording_vm; /* GPUSOCKETS_AOT_RECORD: the JVM whose exit writes the AOT configuration */

static pid_t boot_pid; /* the process whose JVM this is: a fork()ed child has none of its threads */

static void at_exit(void) {
    if (getpid() != boot_pid) {
        return; /* a fork()ed child: an upcall into the parent's JVM would never return */
    }
    if (booted && resolve != NULL) {
        void (*goodbye)(void) = (void (*)(void)) resolve(-1);
        if (goodbye != NULL) {
            goodbye();
        }
    }
    if (recording_vm != NULL) {
        /* the JVM writes what -XX:AOTMode=record saw only on its own exit path, which a C program's
         * exit() never takes: DestroyJavaVM does (from this thread, attached by it) */
        (*recording_vm)->DestroyJavaVM(recording_vm);
    }
}
static char boot_error[1024];

typedef jint (JNICALL *create_vm_fn)(JavaVM **, void **, void *);

static void fail(const char *fmt, const char *a, const char *b) {
    snprintf(boot_error, sizeof boot_error, fmt, a ? a : "", b ? b : "");
}

/* PREFIX of PREFIX/lib/libcuda.so.1, from where the loader found this library. */
static int install_prefix(char *out, size_t size) {
    Dl_info info;
    if (dladdr((void *) &gpus_entry, &info) == 0 || info.dli_fname == NULL) {
        return -1;
    }
    char path[PATH_MAX];
    if (realpath(info.dli_fname, path) == NULL) {
        return -1;
    }
    char *slash = strrchr(path, '/'); /* .../lib/libcuda.so.1 -> .../lib */
    if (slash == NULL) {
        return -1;
    }
    *slash = '\0';
    slash = strrchr(path, '/'); /* .../lib -> ... */
    if (slash == NULL) {
        return -1;
    }
    *slash = '\0';
    snprintf(out, size, "%s", path);
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Every PREFIX/lib/NAME.jar, ':'-separated, in name order: the class-data-sharing archive made at
 * install time is only used with exactly the class path it was made with. */
static char *jar_class_path(const char *prefix) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/lib", prefix);
    struct dirent **entries;
    int n = scandir(dir, &entries, NULL, NULL);
    if (n < 0) {
        return NULL;
    }
    char **names = calloc((size_t) n + 1, sizeof *names);
    int jars = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(entries[i]->d_name);
        if (names != NULL && len >= 5 && strcmp(entries[i]->d_name + len - 4, ".jar") == 0) {
            names[jars++] = strdup(entries[i]->d_name);
        }
        free(entries[i]);
    }
    free(entries);
    if (names == NULL || jars == 0) {
        free(names);
        return NULL;
    }
    qsort(names, (size_t) jars, sizeof *names, compare_names);
    size_t cap = 1;
    for (int i = 0; i < jars; i++) {
        cap += strlen(dir) + strlen(names[i]) + 2;
    }
    char *cp = malloc(cap);
    size_t len = 0;
    for (int i = 0; i < jars; i++) {
        if (cp != NULL) {
            len += (size_t) snprintf(cp + len, cap - len, "%s%s/%s", len ? ":" : "", dir, names[i]);
        }
        free(names[i]);
    }
    free(names);
    return cp;
}

struct boot_args {
    char java_home[PATH_MAX];
    char *class_path;
    char archive[PATH_MAX]; /* PREFIX/lib/gpusockets.aot or .jsa when one exists, else empty */
    int aot;                /* archive is an AOT cache (-XX:AOTCache) */
    int trace;              /* GPUSOCKETS_TRACE_STARTUP set */
    long long started_ns;   /* CLOCK_MONOTONIC at the first call, for the trace */
};

static long long monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long) t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *boot_thread(void *arg) {
    struct boot_args *a = arg;
    char libjvm[PATH_MAX + 32];
    snprintf(libjvm, sizeof libjvm, "%s/lib/server/libjvm.so", a->java_home);
    void *jvm = dlopen(libjvm, RTLD_NOW | RTLD_LOCAL);
    if (jvm == NULL) {
        fail("cannot load the Java runtime %s (%s); set GPUSOCKETS_JAVA_HOME", libjvm, dlerror());
        return NULL;
    }
    create_vm_fn create = (create_vm_fn) dlsym(jvm, "JNI_CreateJavaVM");
    if (create == NULL) {
        fail("%s has no JNI_CreateJavaVM%s", libjvm, NULL);
        return NULL;
    }
    size_t cp_len = strlen(a->class_path) + 32;
    char *cp_option = malloc(cp_len);
    if (cp_option == NULL) {
        fail("out of memory%s%s", NULL, NULL);
        return NULL;
    }
    snprintf(cp_option, cp_len, "-Djava.class.path=%s", a->class_path);
    char archive_option[PATH_MAX + 32];
    snprintf(archive_option, sizeof archive_option, a->aot ? "-XX:AOTCache=%s" : "-XX:SharedArchiveFile=%s", a->archive);
    /* the Java side's trace takes our times: CLOCK_MONOTONIC, as System.nanoTime */
    char trace_option[96];
    snprintf(trace_option, sizeof trace_option, "-Dgpusockets.startup.trace=%lld,%lld", a->started_ns, monotonic_ns());
    JavaVMOption options[] = {
        {a->archive[0] ? archive_option : "-Xshare:auto", NULL}, /* classes of the frontend, pre-parsed */
        {"-Xlog:cds=off,cds+dynamic=off,aot=off", NULL}, /* a stale archive is skipped quietly */
        {cp_option, NULL},
        {"-Xrs", NULL},                              /* leave the program's signals alone */
        {"--enable-native-access=ALL-UNNAMED", NULL},
        {"-XX:+UseSerialGC", NULL},                  /* few threads, small footprint */
        {"-XX:-UsePerfData", NULL},                  /* no hsperfdata file in the program's /tmp */
        {"-Xss2m", NULL},
        /* a small first heap: the young generation starts small and is collected instead of spread over
         * fresh pages (by hand, 2-core box, unix: VmHWM 72.1 -> 58.4 MB; -Xmx64m, -XX:ReservedCodeCacheSize=16m,
         * -XX:CICompilerCount=1, -XX:MaxMetaspaceSize=64m, -Xss512k and -XX:ArchiveRelocationMode=0 each
         * changed it by less than 1 MB). Not below 4 MB: with -Xms2m the archive's heap objects do not fit,
         * so the JVM builds the module graph itself, and an AOT cache is refused (the JVM does not start).
         * The heap still grows to the default maximum. */
        {"-Xms4m", NULL},
        /* C1 only: a short program's first calls no longer wait behind C2 compiles (device_query
         * 160 -> 120 ms wall, 250 -> 190 ms CPU; memory_roundtrip 1180 -> 990 ms); the per-call Java
         * path is small and C1 code serves it. _JAVA_OPTIONS=-XX:TieredStopAtLevel=4 brings C2 back. */
        {"-XX:TieredStopAtLevel=1", NULL},
        {"-Dgpusockets.frontend.unreachable=true", NULL}, /* left out unless the probe found no backend */
        {trace_option, NULL},                        /* last: left out unless tracing */
    };
    if (!unreachable) {
        options[sizeof options / sizeof options[0] - 2] = options[sizeof options / sizeof options[0] - 1];
    }
    const char *record = getenv("GPUSOCKETS_AOT_RECORD");
    char record_option[PATH_MAX + 32];
    if (record != NULL && *record) {
        snprintf(record_option, sizeof record_option, "-XX:AOTConfiguration=%s", record);
        options[0].optionString = "-XX:AOTMode=record";
        options[1].optionString = record_option;
    }
    JavaVMInitArgs init = {
        .version = JNI_VERSION_10,
        .nOptions = (jint) (sizeof options / sizeof options[0]) - (a->trace ? 0 : 1) - (unreachable ? 0 : 1),
        .options = options,
        .ignoreUnrecognized = JNI_FALSE,
    };
    JavaVM *vm;
    JNIEnv *env;
    if (create(&vm, (void **) &env, &init) != JNI_OK) {
        fail("the Java runtime in %s did not start%s", a->java_home, NULL);
        free(cp_option);
        return NULL;
    }
    free(cp_option);
    jclass entry = (*env)->FindClass(env, "io/gpusockets/frontend/NativeEntry");
    jmethodID install = entry ? (*env)->GetStaticMethodID(env, entry, "install", "(JI)V") : NULL;
    if (install != NULL) {
        (*env)->CallStaticVoidMethod(env, entry, install, (jlong) (uintptr_t) &resolve, (jint) gpus_function_count);
    }
    if ((*env)->ExceptionCheck(env)) {
        (*env)->ExceptionDescribe(env);
        fail("the GPUsockets frontend classes failed to start (class path %s)%s", a->class_path, NULL);
    } else if (install == NULL) {
        fail("io.gpusockets.frontend.NativeEntry not found on the class path %s%s", a->class_path, NULL);
    } else if (resolve == NULL) {
        fail("the GPUsockets frontend gave no resolver%s%s", NULL, NULL);
    } else {
        booted = 1;
        boot_pid = getpid();
        if (record != NULL && *record) {
            recording_vm = vm;
        }
        atexit(at_exit);
    }
    (*vm)->DetachCurrentThread(vm);
    return NULL;
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static int blank(const char *v) {
    return v == NULL || *v == '\0';
}

/* Whether NAME matches [A-Za-z0-9._-]+ and is not . or .. (RingAddress's rule). */
static int ring_name(const char *name) {
    if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return 0;
    }
    for (const char *c = name; *c; c++) {
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-')) {
            return 0;
        }
    }
    return 1;
}

/*
 * Before the JVM starts for cuInit: whether GPUSOCKETS_SERVER names one unix:///PATH or ring://NAME
 * whose socket file does not exist, so that the connect the frontend would make must fail, and how
 * it would say so (its message, byte for byte). Only where nothing else could change that outcome or
 * message: the variable is set in the environment (it wins over the config file), nothing can hand
 * the JVM other properties (_JAVA_OPTIONS, JAVA_TOOL_OPTIONS), there is no config file
 * (/etc/gpusockets/frontend.conf) and GPUSOCKETS_PSK_FILE and GPUSOCKETS_CONNECT_TIMEOUT_MS, which
 * the frontend reads before connecting, are unset or valid. A socket file that exists (a listener
 * or a stale one) is left to the frontend: probing it would connect to the backend.
 */
static void probe(void) {
    const char *server = getenv("GPUSOCKETS_SERVER");
    if (blank(server) || !blank(getenv("_JAVA_OPTIONS")) || !blank(getenv("JAVA_TOOL_OPTIONS"))
        || access("/etc/gpusockets/frontend.conf", F_OK) == 0) {
        return;
    }
    const char *psk = getenv("GPUSOCKETS_PSK_FILE");
    struct stat st;
    if (!blank(psk) && (stat(psk, &st) != 0 || !S_ISREG(st.st_mode) || access(psk, R_OK) != 0)) {
        return;
    }
    const char *timeout = getenv("GPUSOCKETS_CONNECT_TIMEOUT_MS");
    if (timeout != NULL) {
        size_t n = strlen(timeout);
        if (n == 0 || n > 18 || strspn(timeout, "0123456789") != n || strspn(timeout, "0") == n) {
            return;
        }
    }
    if (strpbrk(server, " \t\r\n\f\v,") != NULL) {
        return;
    }
    char socket_path[PATH_MAX];
    const char *message;
    if (strncmp(server, "unix:///", 8) == 0) {
        const char *path = server + 7;
        if (strlen(path) >= 108) {
            return;
        }
        snprintf(socket_path, sizeof socket_path, "%s", path);
        message = "cannot connect to %s: No such file or directory; cuInit returns CUDA_ERROR_NO_DEVICE";
    } else if (strncmp(server, "ring://", 7) == 0 && ring_name(server + 7)) {
        if (snprintf(socket_path, sizeof socket_path, "/tmp/gpusockets-ring-%s.sock", server + 7) > 107) {
            return;
        }
        message = "nobody listens on %s (no socket at %s); cuInit returns CUDA_ERROR_NO_DEVICE";
    } else {
        return;
    }
    if (stat(socket_path, &st) == 0 || errno != ENOENT) {
        return;
    }
    snprintf(boot_error, sizeof boot_error, message, server, socket_path);
    unreachable = 1;
}

static void boot(void) {
    __atomic_store_n(&boot_started, 1, __ATOMIC_RELEASE);
    if (gpus_function_count > GPUS_MAX_FUNCTIONS) {
        fail("too many API functions%s%s", NULL, NULL);
        return;
    }
    struct boot_args a;
    const char *trace = getenv("GPUSOCKETS_TRACE_STARTUP");
    a.trace = trace != NULL && *trace && strcmp(trace, "0") != 0;
    a.started_ns = monotonic_ns();
    char prefix[PATH_MAX];
    int have_prefix = install_prefix(prefix, sizeof prefix) == 0;
    const char *home = getenv("GPUSOCKETS_JAVA_HOME");
    if (home != NULL && *home) {
        snprintf(a.java_home, sizeof a.java_home, "%s", home);
    } else if (have_prefix) {
        snprintf(a.java_home, sizeof a.java_home, "%s/runtime", prefix);
    } else {
        fail("cannot tell where libcuda.so.1 is installed; set GPUSOCKETS_JAVA_HOME and GPUSOCKETS_CLASSPATH%s%s", NULL, NULL);
        return;
    }
    a.archive[0] = '\0';
    a.aot = 0;
    if (have_prefix) {
        char archive[PATH_MAX];
        snprintf(archive, sizeof archive, "%s/lib/gpusockets.aot", prefix);
        a.aot = access(archive, R_OK) == 0;
        if (!a.aot) {
            snprintf(archive, sizeof archive, "%s/lib/gpusockets.jsa", prefix);
        }
        if (access(archive, R_OK) == 0) {
            snprintf(a.archive, sizeof a.archive, "%s", archive);
        }
    }
    const char *cp = getenv("GPUSOCKETS_CLASSPATH");
    a.class_path = cp != NULL && *cp ? strdup(cp) : have_prefix ? jar_class_path(prefix) : NULL;
    if (a.class_path == NULL) {
        fail("no GPUsockets jars next to libcuda.so.1 (%s/lib/NAME.jar); set GPUSOCKETS_CLASSPATH%s",
             have_prefix ? prefix : "?", NULL);
        return;
    }
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, GPUS_JVM_STACK);
    if (pthread_create(&thread, &attr, boot_thread, &a) != 0) {
        fail("cannot start the frontend thread%s%s", NULL, NULL);
    } else {
        pthread_join(thread, NULL);
    }
    pthread_attr_destroy(&attr);
    free(a.class_path);
}

/* GPUSOCKETS_EARLY_START=1: the library's constructor began the start (probe, JVM, connection) on a
 * thread of its own, to overlap the program's own start. */
static int early_start;
/* a call of the program's own has reached gpus_entry */
static int program_called;
/* this process is a fork()ed child of one whose early start had begun before any CUDA call: its JVM
 * (if any) is not usable here, and another cannot be started in this process */
static int forked_off;

/* What a program nearly always calls first: their upcall stubs are made ahead by an early start. */
static const char *const first_calls[] = {"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuCtxCreate", "cuCtxCreate_v2",
                                          "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuCtxGetCurrent", "cuMemAlloc"};

static void *early_thread(void *arg) {
    (void) arg;
    pthread_once(&probe_once, probe);
    if (unreachable) {
        return NULL;
    }
    pthread_once(&boot_once, boot);
    for (int i = 0; booted && i < gpus_function_count; i++) {
        for (size_t k = 0; k < sizeof first_calls / sizeof first_calls[0]; k++) {
            if (strcmp(gpus_function_names[i], first_calls[k]) == 0 && __atomic_load_n(&upcalls[i], __ATOMIC_ACQUIRE) == NULL) {
                void *fn = resolve(i);
                __atomic_store_n(&upcalls[i], fn, __ATOMIC_RELEASE);
            }
        }
    }
    return NULL;
}

static void after_fork_in_child(void) {
    if (__atomic_load_n(&early_start, __ATOMIC_RELAXED) && !__atomic_load_n(&program_called, __ATOMIC_RELAXED)) {
        forked_off = 1;
        memset(upcalls, 0, sizeof upcalls); /* stubs made ahead lead into the parent's JVM: none here */
        snprintf(boot_error, sizeof boot_error, "%s",
                 "this process was fork()ed from one whose GPUsockets frontend had started early (GPUSOCKETS_EARLY_START=1),"
                 " and a forked child cannot use it; unset GPUSOCKETS_EARLY_START for programs that fork before their first"
                 " CUDA call and call CUDA in the children");
    }
}

__attribute__((constructor)) static void start_early(void) {
    const char *e = getenv("GPUSOCKETS_EARLY_START");
    if (e == NULL || strcmp(e, "1") != 0) {
        return;
    }
    pthread_atfork(NULL, NULL, after_fork_in_child);
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    __atomic_store_n(&early_start, 1, __ATOMIC_RELAXED);
    if (pthread_create(&thread, &attr, early_thread, NULL) != 0) {
        __atomic_store_n(&early_start, 0, __ATOMIC_RELAXED); /* the first call starts it, as without the variable */
    }
    pthread_attr_destroy(&attr);
}

void *gpus_entry(int index) {
    void *fn = __atomic_load_n(&upcalls[index], __ATOMIC_ACQUIRE);
    if (fn != NULL) {
        return fn;
    }
    if (forked_off) {
        return NULL; /* gpus_unavailable says why, once */
    }
    if (!__atomic_load_n(&program_called, __ATOMIC_RELAXED)) {
        __atomic_store_n(&program_called, 1, __ATOMIC_RELAXED);
    }
    if (index >= 0 && index < gpus_function_count && strcmp(gpus_function_names[index], "cuInit") == 0) {
        if (!__atomic_load_n(&boot_started, __ATOMIC_ACQUIRE)) {
            pthread_once(&probe_once, probe);
        }
        if (unreachable) {
            return NULL; /* gpus_unavailable: CUDA_ERROR_NO_DEVICE, the message once */
        }
    }
    pthread_once(&boot_once, boot);
    if (!booted || index < 0 || index >= gpus_function_count) {
        return NULL;
    }
    /* Stubs are made when a function is first called: a program pays only for what it uses. */
    fn = resolve(index);
    __atomic_store_n(&upcalls[index], fn, __ATOMIC_RELEASE);
    return fn;
}

CUresult gpus_unavailable(int index) {
    static int reported;
    if (!__atomic_exchange_n(&reported, 1, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "gpusockets: %s\n", boot_error[0] ? boot_error : "the frontend did not start");
    }
    return index >= 0 && index < gpus_function_count && strcmp(gpus_function_names[index], "cuInit") == 0
        ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
}
