/*
 * Unit test of libcuda.so.1's private tables (src/export_tables.c), built by gcc with the file
 * included and the driver calls it makes stubbed here: MD2 against RFC 1319's test suite, the
 * integrity check's fixed answers and its dependence on every input, and context-local storage
 * (put, get, delete, the NULL context, destructors when a context ends). Prints one line per check
 * and "PASS"; exits 1 on the first failure. Run by ExportTablesUnitTest.
 */
#include "../../src/export_tables.c"

#include <stdlib.h>

/* ---- stubs of the driver calls export_tables.c makes ---- */
static CUcontext current_ctx;
CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGetUuid_v2(void *uuid, CUdevice dev) { memset(uuid, 0x11 + dev, 16); return CUDA_SUCCESS; }
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) { *pi = attrib + dev; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) { *pctx = (CUcontext) (uintptr_t) (0x1000 + dev); return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *pctx) { *pctx = current_ctx; return CUDA_SUCCESS; }
CUresult cuModuleLoadData(CUmodule *module, const void *image) { *module = (CUmodule) image; return CUDA_SUCCESS; }
CUresult cuStreamGetId(CUstream stream, unsigned long long *id) {
    *id = 5000 + (uintptr_t) stream;
    return CUDA_SUCCESS;
}
/* a module 0x30 of three functions 0x31..0x33; any other module is refused */
CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod) {
    if (mod != (CUmodule) 0x30) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    *count = 3;
    return CUDA_SUCCESS;
}
CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int n, CUmodule mod) {
    for (unsigned int i = 0; i < n; i++) {
        functions[i] = (CUfunction) (uintptr_t) (0x31 + i);
    }
    return mod == (CUmodule) 0x30 && n == 3 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static CUfunction visited[8];
static int visits;
static void visit(void *user, CUfunction f) {
    *(CUfunction *) user = f;
    if (visits < 8) {
        visited[visits++] = f;
    }
}
CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
    if (ctx == NULL) {
        ctx = current_ctx;
    }
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *id = 7000 + (uintptr_t) ctx;
    return CUDA_SUCCESS;
}

static void check(int ok, const char *what) {
    printf("%s: %s\n", what, ok ? "ok" : "FAILED");
    if (!ok) {
        exit(1);
    }
}

static int md2_is(const char *text, const char *hex) {
    uint8_t d[16];
    char got[33];
    gpus_md2(text, strlen(text), d);
    for (int i = 0; i < 16; i++) {
        snprintf(got + 2 * i, 3, "%02x", d[i]);
    }
    return strcmp(got, hex) == 0;
}

static int destroyed;
static void *destroyed_value;
static void dtor(CUcontext ctx, void *key, void *value) {
    destroyed++;
    destroyed_value = value;
}

int main(void) {
    /* RFC 1319, A.5 */
    check(md2_is("", "8350e5a3e24c153df2275c9f80692773"), "MD2 of the empty string");
    check(md2_is("a", "32ec01ec4a6dac72c0ab96fb34c0b5d1"), "MD2 of a");
    check(md2_is("abc", "da853b0d3f88d99b30283a69e6ded6bb"), "MD2 of abc");
    check(md2_is("message digest", "ab4f496bfb2a530b219ff33031fe06b0"), "MD2 of message digest");
    check(md2_is("abcdefghijklmnopqrstuvwxyz", "4e8ddff3650292ab5a4108c3aa47940b"), "MD2 of the alphabet");
    check(md2_is("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "da33def2a42df13975352846c30338cd"),
          "MD2 of 62 characters");
    check(md2_is("12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                 "d5976f79d83d3a0dc9806c3c66f3efd8"), "MD2 of 80 digits");

    /* the integrity check: fixed answers for versions ending in 0 and 1, a keyed hash otherwise */
    uint64_t a[2], b[2];
    CUresult (*integrity)(uint32_t, uint64_t, uint64_t *) = (CUresult (*)(uint32_t, uint64_t, uint64_t *)) integrity_fns[1];
    check(integrity(13000, 1, a) == CUDA_SUCCESS && a[0] == 0x3341181c03cb675cULL && a[1] == 0x8ed383aa1f4cd1e8ULL,
          "integrity check, version 13000");
    check(integrity(13001, 1, a) == CUDA_SUCCESS && a[0] == 0x1841181c03cb675cULL, "integrity check, version 13001");
    check(integrity(13002, 1796170000, a) == CUDA_SUCCESS && integrity(13002, 1796170000, b) == CUDA_SUCCESS
          && a[0] == b[0] && a[1] == b[1], "integrity check, version 13002: the same inputs, the same answer");
    check(integrity(13002, 1796170001, b) == CUDA_SUCCESS && (a[0] != b[0] || a[1] != b[1]),
          "integrity check: another second, another answer");
    struct device_facts other = facts.device[0];
    other.pci_bus ^= 1;
    gpus_integrity_hash(13002, 1796170000, facts.driver_version, (uint32_t) getpid(), (uint32_t) pthread_self(),
                        cudart_fns, integrity_fns, integrity_fns[1], 1, &other, b);
    check(a[0] != b[0] || a[1] != b[1], "integrity check: another PCI bus, another answer");
    check(integrity(13002, 1, NULL) == CUDA_ERROR_INVALID_VALUE, "integrity check without a result");

    /* context-local storage */
    CUresult (*put)(CUcontext, void *, void *, cls_dtor) = (CUresult (*)(CUcontext, void *, void *, cls_dtor)) cls_fns[0];
    CUresult (*del)(CUcontext, void *) = (CUresult (*)(CUcontext, void *)) cls_fns[1];
    CUresult (*get)(void **, CUcontext, void *) = (CUresult (*)(void **, CUcontext, void *)) cls_fns[2];
    int key1, key2;
    void *v = NULL;
    current_ctx = NULL;
    check(get(&v, NULL, &key1) == CUDA_ERROR_INVALID_CONTEXT, "storage: no current context");
    current_ctx = (CUcontext) 0x1000;
    check(get(&v, NULL, &key1) == CUDA_ERROR_INVALID_HANDLE, "storage: a key never put");
    check(put(NULL, &key1, (void *) 0x51, dtor) == CUDA_SUCCESS, "storage: put in the current context");
    check(get(&v, (CUcontext) 0x1000, &key1) == CUDA_SUCCESS && v == (void *) 0x51, "storage: get by the context");
    check(put((CUcontext) 0x2000, &key1, (void *) 0x52, dtor) == CUDA_SUCCESS
          && get(&v, (CUcontext) 0x2000, &key1) == CUDA_SUCCESS && v == (void *) 0x52
          && get(&v, NULL, &key1) == CUDA_SUCCESS && v == (void *) 0x51, "storage: one key, two contexts");
    check(put(NULL, &key2, (void *) 0x53, NULL) == CUDA_SUCCESS && del(NULL, &key2) == CUDA_SUCCESS
          && get(&v, NULL, &key2) == CUDA_ERROR_INVALID_HANDLE, "storage: delete");
    gpus_cls_context_gone((CUcontext) 0x2000);
    check(destroyed == 1 && destroyed_value == (void *) 0x52 && get(&v, (CUcontext) 0x2000, &key1) == CUDA_ERROR_INVALID_HANDLE
          && get(&v, (CUcontext) 0x1000, &key1) == CUDA_SUCCESS, "storage: a destroyed context's destructor runs, once");
    gpus_cls_primary_reset(0); /* the stub's primary context of device 0 is 0x1000 */
    check(destroyed == 2 && destroyed_value == (void *) 0x51, "storage: a primary reset runs the destructors");

    /* TOOLS_TLS[2]: the current context, whatever else the caller passes */
    CUresult (*tls_current)(CUcontext *, uint64_t, void *) = (CUresult (*)(CUcontext *, uint64_t, void *)) tls_fns[2];
    CUcontext c = (CUcontext) 1;
    current_ctx = (CUcontext) 0x3000;
    check(tls_current(&c, 0x37, &key1) == CUDA_SUCCESS && c == (CUcontext) 0x3000, "TOOLS_TLS[2]: the current context");
    current_ctx = NULL;
    check(tls_current(&c, 0, NULL) == CUDA_SUCCESS && c == NULL, "TOOLS_TLS[2]: no current context, NULL");
    check(tls_current(NULL, 0, NULL) == CUDA_ERROR_INVALID_VALUE, "TOOLS_TLS[2] without an output");

    /* CONTEXT_IDENTITY[4]: cuCtxGetId's answer */
    CUresult (*context_id)(CUcontext, unsigned long long *) = (CUresult (*)(CUcontext, unsigned long long *)) context_identity_fns[4];
    unsigned long long id = 0;
    check(context_id((CUcontext) 0x10, &id) == CUDA_SUCCESS && id == 7016, "CONTEXT_IDENTITY[4]: a context's id");
    check(context_id(NULL, &id) == CUDA_ERROR_INVALID_CONTEXT, "CONTEXT_IDENTITY[4]: no current context");
    check(context_id(NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "CONTEXT_IDENTITY[4] without an output");
    unsigned char identity[16] = {0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2};
    const void *ti = NULL;
    check(cuGetExportTable(&ti, identity) == CUDA_SUCCESS && ti == context_identity_fns
          && (uintptr_t) context_identity_fns[0] == 744, "CONTEXT_IDENTITY by its GUID, 744 bytes as on driver 580");
    for (int i = 1; i < 93; i++) {
        check(context_identity_fns[i] != NULL, "CONTEXT_IDENTITY: every slot filled");
    }
    CUresult (*unknown)(void) = (CUresult (*)(void)) context_identity_fns[92];
    check(unknown() == CUDA_ERROR_NOT_SUPPORTED, "CONTEXT_IDENTITY: an unknown slot says so");

    /* CONTEXT_IDENTITY[51] and [39]: an object for a stream, then that stream's id */
    CUresult (*stream_object)(CUcontext, CUstream, void **) = (CUresult (*)(CUcontext, CUstream, void **)) context_identity_fns[51];
    CUresult (*stream_id)(CUcontext, void *, unsigned long long *) = (CUresult (*)(CUcontext, void *, unsigned long long *)) context_identity_fns[39];
    void *o0 = NULL, *o0again = NULL, *o9 = NULL;
    check(stream_object((CUcontext) 0x10, NULL, &o0) == CUDA_SUCCESS && o0 != NULL && *(uint64_t *) o0 == 1,
          "CONTEXT_IDENTITY[51]: an object for the NULL stream, its first word 1 as the driver's");
    check(stream_object((CUcontext) 0x10, NULL, &o0again) == CUDA_SUCCESS && o0again == o0, "CONTEXT_IDENTITY[51]: the same stream, the same object");
    check(stream_object((CUcontext) 0x10, (CUstream) 9, &o9) == CUDA_SUCCESS && o9 != o0, "CONTEXT_IDENTITY[51]: another stream, another object");
    check(stream_id((CUcontext) 0x10, o0, &id) == CUDA_SUCCESS && id == 5000, "CONTEXT_IDENTITY[39]: the NULL stream's id");
    check(stream_id((CUcontext) 0x10, o9, &id) == CUDA_SUCCESS && id == 5009, "CONTEXT_IDENTITY[39]: stream 9's id");
    check(stream_id((CUcontext) 0x10, &key1, &id) == CUDA_ERROR_INVALID_VALUE, "CONTEXT_IDENTITY[39]: an object not of ours is refused");
    check(stream_object((CUcontext) 0x10, NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "CONTEXT_IDENTITY[51] without an output");

    /* MODULE_FUNCTIONS[7]: every function of the module through the visitor, and their count */
    unsigned int (*module_functions)(CUcontext, CUmodule, void (*)(void *, CUfunction), void *) =
        (unsigned int (*)(CUcontext, CUmodule, void (*)(void *, CUfunction), void *)) module_functions_fns[7];
    CUfunction last = NULL;
    check(module_functions((CUcontext) 0x10, (CUmodule) 0x30, visit, &last) == 3 && visits == 3
          && visited[0] == (CUfunction) 0x31 && visited[2] == (CUfunction) 0x33 && last == (CUfunction) 0x33,
          "MODULE_FUNCTIONS[7]: three functions visited in order, the count returned");
    check(module_functions((CUcontext) 0x10, (CUmodule) 0x99, visit, &last) == 0 && visits == 3,
          "MODULE_FUNCTIONS[7]: a module that cannot be listed has none");
    unsigned char module_guid[16] = {0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1, 0x82, 0xaf, 0xf1, 0x99, 0x1e};
    check(cuGetExportTable(&ti, module_guid) == CUDA_SUCCESS && ti == module_functions_fns
          && (uintptr_t) module_functions_fns[0] == 792, "MODULE_FUNCTIONS by its GUID, 792 bytes as on driver 580");
    for (int i = 1; i < 99; i++) {
        check(module_functions_fns[i] != NULL, "MODULE_FUNCTIONS: every slot filled");
    }

    /* the tables: GUIDs, size words */
    const void *t = NULL;
    unsigned char guid[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
    check(cuGetExportTable(&t, guid) == CUDA_SUCCESS && t == integrity_fns && (uintptr_t) integrity_fns[0] == 24,
          "INTEGRITY_CHECK by its GUID, 24 bytes");
    /* once a table has been asked for, every slot of every table is filled, each unknown one with
     * its own stub, which says NOT_SUPPORTED; the known ones are left as they are */
    for (int tb = 0; tb < T_COUNT; tb++) {
        check(tables[tb].slots <= MAX_SLOTS, "a table no longer than MAX_SLOTS");
        for (int sl = tables[tb].size_word ? 1 : 0; sl < tables[tb].slots; sl++) {
            check(tables[tb].fns[sl] != NULL, tables[tb].name);
        }
    }
    check(cudart_fns[3] == slot_stubs[T_CUDART][3] && cudart_fns[4] == slot_stubs[T_CUDART][4]
          && ((CUresult (*)(void)) cudart_fns[3])() == CUDA_ERROR_NOT_SUPPORTED, "CUDART_INTERFACE[3]: its own stub");
    check(cudart_fns[2] == (void *) cudart_primary_context && cls_fns[3] == slot_stubs[T_CLS][3],
          "known slots kept, the size-word-less table filled from slot 0");
    guid[0] ^= 0xff;
    check(cuGetExportTable(&t, guid) == CUDA_ERROR_NOT_SUPPORTED && t == NULL, "an unknown GUID is refused");
    printf("PASS\n");
    return 0;
}
