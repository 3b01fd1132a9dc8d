/* The floor: each benchmark workload driven straight through the ZGC ABI from C, with the
 * same artifacts the Node runtime loads. Usage: floor <artifact.so> <workload>
 * Prints {"workload", "median_ns", "batches_ns"}: nanoseconds per operation, median of
 * timed batches (each batch at least MIN_BATCH_NS long). */
#define _POSIX_C_SOURCE 199309L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef size_t (*size_fn)(void);
typedef int (*init_fn)(void *, size_t);
typedef int (*run_fn)(void *);
typedef int (*copy_fn)(void *, uint32_t, const void *, size_t);
typedef int (*bind_fn)(void *, uint32_t, void *, size_t);
typedef int (*out_fn)(void *, size_t, void *, size_t);

static init_fn init;
static run_fn run;
static copy_fn copy_source;
static bind_fn bind_source;
static out_fn copy_output;
static void *rt;

#define BATCHES 15
#define MIN_BATCH_NS 40000000.0
#define CHECK(call) do { int s_ = (call); if (s_) { fprintf(stderr, "%s failed: %d\n", #call, s_); exit(1); } } while (0)

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef void (*op_fn)(void);

static void measure(const char *name, op_fn op) {
    long iters = 1;
    for (;;) { /* calibrate */
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) op();
        if (now_ns() - t0 >= MIN_BATCH_NS / 4) break;
        iters *= 2;
    }
    iters = iters * 4;
    double batches[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) op();
        batches[b] = (now_ns() - t0) / iters;
    }
    double sorted[BATCHES];
    memcpy(sorted, batches, sizeof sorted);
    qsort(sorted, BATCHES, sizeof(double), cmp);
    printf("{\"workload\":\"%s\",\"median_ns\":%.1f,\"batches_ns\":[", name, sorted[BATCHES / 2]);
    for (int b = 0; b < BATCHES; b++) printf("%s%.1f", b ? "," : "", batches[b]);
    printf("]}\n");
}

static size_t n;
static float *in_a, *in_b, *out_f;
static _Float16 *half_in, *half_out;
static float *logical, *physical;

static void op_add(void) {
    CHECK(copy_source(rt, 1, in_a, n * 4));
    CHECK(copy_source(rt, 2, in_b, n * 4));
    CHECK(run(rt));
    CHECK(copy_output(rt, 0, out_f, n * 4));
}

static void op_bound(void) {
    CHECK(run(rt));
    CHECK(copy_output(rt, 0, out_f, n * 4));
}

/* The transposed, padded layout of pack.c: logical (i, j) at j * 1040 + i. */
static void op_pack(void) {
    for (size_t i = 0; i < 1024; i++)
        for (size_t j = 0; j < 1024; j++) physical[j * 1040 + i] = logical[i * 1024 + j];
    CHECK(bind_source(rt, 1, physical, (size_t)1040 * 1024 * 4));
}

static void op_half(void) {
    for (size_t k = 0; k < n; k++) half_in[k] = (_Float16)in_a[k];
    CHECK(copy_source(rt, 1, half_in, n * 2));
    CHECK(run(rt));
    CHECK(copy_output(rt, 0, half_out, n * 2));
    for (size_t k = 0; k < n; k++) out_f[k] = (float)half_out[k];
}

static void op_matmul(void) {
    CHECK(copy_source(rt, 1, in_a, n * 4));
    CHECK(run(rt));
    CHECK(copy_output(rt, 0, out_f, n * 4));
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: floor <artifact.so> <workload>\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    size_t size = ((size_fn)dlsym(lib, "zgc_runtime_size"))();
    size_t align = ((size_fn)dlsym(lib, "zgc_runtime_alignment"))();
    init = (init_fn)dlsym(lib, "zgc_runtime_init");
    run = (run_fn)dlsym(lib, "zgc_runtime_run");
    copy_source = (copy_fn)dlsym(lib, "zgc_runtime_copy_source");
    bind_source = (bind_fn)dlsym(lib, "zgc_runtime_bind_source");
    copy_output = (out_fn)dlsym(lib, "zgc_runtime_copy_output");
    rt = aligned_alloc(align, (size + align - 1) / align * align);
    CHECK(init(rt, size));
    const char *w = argv[2];
    n = !strcmp(w, "add-tiny") ? 4 : !strcmp(w, "matmul") ? 256 * 256 : 1u << 20;
    in_a = aligned_alloc(64, n * 4);
    in_b = aligned_alloc(64, n * 4);
    out_f = aligned_alloc(64, n * 4);
    for (size_t k = 0; k < n; k++) { in_a[k] = (float)(k % 1000) * 0.5f; in_b[k] = 1.0f; }
    if (!strcmp(w, "add-tiny") || !strcmp(w, "add-owned-1m")) measure(w, op_add);
    else if (!strcmp(w, "add-bound-1m")) {
        CHECK(bind_source(rt, 1, in_a, n * 4));
        CHECK(bind_source(rt, 2, in_b, n * 4));
        measure(w, op_bound);
    } else if (!strcmp(w, "pack")) {
        logical = in_a;
        physical = aligned_alloc(64, (size_t)1040 * 1024 * 4);
        memset(physical, 0, (size_t)1040 * 1024 * 4);
        measure(w, op_pack);
    } else if (!strcmp(w, "half-1m")) {
        half_in = aligned_alloc(64, n * 2);
        half_out = aligned_alloc(64, n * 2);
        measure(w, op_half);
    } else if (!strcmp(w, "matmul")) {
        CHECK(bind_source(rt, 2, in_b, n * 4));
        measure(w, op_matmul);
    } else { fprintf(stderr, "unknown workload %s\n", w); return 2; }
    return 0;
}
