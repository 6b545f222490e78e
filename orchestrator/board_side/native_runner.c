/*
 * orch native runner: times one ONNX model through ONNX Runtime's C API and prints one JSON document.
 *
 * The native counterpart of bench_agent.py, for boards whose product runs no Python: it measures what a
 * native process on that board sees (process start -> main -> session created -> first result, warm
 * latencies, peak RSS), with the same options and the same kind of JSON document, so orch can put the
 * two side by side. Only the C API (onnxruntime_c_api.h of the release it is built for) and libc.
 *
 * Built by orch with the target's cross compiler (orchestrator/builds/native_runner/plan.py), against the
 * header of one ORT release; it loads that release's libonnxruntime.so.1 at run time (dlopen, found
 * through its RPATH $ORIGIN/lib). ORCH_ORT_VERSION is that release: a library of another release is
 * refused before anything else runs, because the C API struct of one release is only promised to be a
 * prefix of a later one's, and figures measured with another library than the one deployed would be
 * wrong without anyone noticing. dlopen rather than linking: ORT versions its exports per release
 * (OrtGetApiBase@VERS_<release>), so a linked runner would be stopped by the dynamic loader with a
 * message about symbol versions; loaded, it reaches its own check and says which release it needs.
 *
 * Process start: ORCH_LAUNCH_T0_NS (CLOCK_REALTIME nanoseconds, set by the launcher right before the
 * exec) when present; else the kernel's start time of this process (/proc/self/stat, clock ticks).
 *
 * Exit codes: 0 measured, 1 failed (the document says where: "stage"), 2 bad arguments.
 */

#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "onnxruntime_c_api.h"

/* ORT keeps this SONAME across 1.x; deploy links it in lib/ to the release's libonnxruntime.so.<version>. */
#ifndef ORCH_ORT_SONAME
#define ORCH_ORT_SONAME "libonnxruntime.so.1"
#endif

#ifndef ORCH_ORT_VERSION
#error "build with -DORCH_ORT_VERSION=\"<the ORT release of the header and library>\""
#endif

#define SCHEMA "orch-native-runner/1"
#define MAX_ITEMS 64
#define XNNPACK_EP "XnnpackExecutionProvider"

/* ------------------------------------------------------------------ a growing text buffer (the JSON) */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static void buf_grow(Buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1) cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data) {
        fputs("orch-runner: out of memory\n", stderr);
        exit(1);
    }
    b->data = data;
    b->cap = cap;
}

static void buf_printf(Buf *b, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    int need = vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    buf_grow(b, (size_t)need);
    va_start(args, fmt);
    vsnprintf(b->data + b->len, (size_t)need + 1, fmt, args);
    va_end(args);
    b->len += (size_t)need;
}

static void buf_str(Buf *b, const char *text) {
    if (!text) {
        buf_printf(b, "null");
        return;
    }
    buf_printf(b, "\"");
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') buf_printf(b, "\\%c", *p);
        else if (*p == '\n') buf_printf(b, "\\n");
        else if (*p == '\t') buf_printf(b, "\\t");
        else if (*p < 0x20) buf_printf(b, "\\u%04x", *p);
        else buf_printf(b, "%c", *p);
    }
    buf_printf(b, "\"");
}

/* A number JSON can hold (NaN and infinities are not JSON). */
static void buf_num(Buf *b, double value) {
    if (isfinite(value)) buf_printf(b, "%.17g", value);
    else buf_printf(b, "null");
}

static void buf_key(Buf *b, const char *key) {
    if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') buf_printf(b, ",");
    buf_str(b, key);
    buf_printf(b, ":");
}

static void buf_sep(Buf *b) {
    if (b->len && b->data[b->len - 1] != '{' && b->data[b->len - 1] != '[') buf_printf(b, ",");
}

/* ------------------------------------------------------------------ clocks */

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long long realtime_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Milliseconds since this process started, and how that start is known. */
typedef struct {
    const char *source; /* "launcher" | "proc-stat" | NULL (unknown) */
    long long t0_realtime_ns;
    double t0_boottime_s;
} Launch;

static Launch launch_origin(void) {
    Launch launch = {NULL, 0, 0.0};
    const char *env = getenv("ORCH_LAUNCH_T0_NS");
    if (env && *env) {
        char *end = NULL;
        long long t0 = strtoll(env, &end, 10);
        if (end && *end == '\0' && t0 > 0) {
            launch.source = "launcher";
            launch.t0_realtime_ns = t0;
            return launch;
        }
    }
    /* Field 22 of /proc/self/stat: start time in clock ticks after boot (after the command name, which
       may hold spaces and parentheses: parse from the last ')'). */
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return launch;
    char line[2048];
    size_t got = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[got] = '\0';
    char *p = strrchr(line, ')');
    if (!p) return launch;
    int field = 2;
    unsigned long long ticks = 0;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field == 22) {
            ticks = strtoull(tok, NULL, 10);
            break;
        }
    }
    long hz = sysconf(_SC_CLK_TCK);
    if (field != 22 || hz <= 0) return launch;
    launch.source = "proc-stat";
    launch.t0_boottime_s = (double)ticks / (double)hz;
    return launch;
}

static double since_launch_ms(const Launch *launch) {
    if (!launch->source) return NAN;
    if (launch->t0_realtime_ns) return (double)(realtime_ns() - launch->t0_realtime_ns) / 1e6;
    struct timespec t;
    clock_gettime(CLOCK_BOOTTIME, &t);
    return ((double)t.tv_sec + (double)t.tv_nsec / 1e9 - launch->t0_boottime_s) * 1000.0;
}

/* ------------------------------------------------------------------ sha256 (of the model file) */

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    unsigned char block[64];
    size_t used;
} Sha256;

static const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(Sha256 *s, const unsigned char *p) {
    uint32_t w[64], a, b, c, d, e, f, g, h;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    s->h[0] += a, s->h[1] += b, s->h[2] += c, s->h[3] += d, s->h[4] += e, s->h[5] += f, s->h[6] += g, s->h[7] += h;
}

static void sha_init(Sha256 *s) {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, init, sizeof init);
    s->bytes = 0;
    s->used = 0;
}

static void sha_update(Sha256 *s, const unsigned char *p, size_t n) {
    s->bytes += n;
    while (n) {
        size_t take = 64 - s->used < n ? 64 - s->used : n;
        memcpy(s->block + s->used, p, take);
        s->used += take, p += take, n -= take;
        if (s->used == 64) {
            sha_block(s, s->block);
            s->used = 0;
        }
    }
}

static void sha_hex(Sha256 *s, char out[65]) {
    uint64_t bits = s->bytes * 8;
    unsigned char pad = 0x80, zero = 0, len[8];
    sha_update(s, &pad, 1);
    while (s->used != 56) sha_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha_update(s, len, 8);
    for (int i = 0; i < 8; i++) sprintf(out + 8 * i, "%08x", s->h[i]);
}

/* ------------------------------------------------------------------ element types */

typedef struct {
    ONNXTensorElementDataType type;
    const char *onnx;  /* as onnxruntime's Python API names it */
    const char *numpy; /* numpy dtype name */
    const char *descr; /* .npy descr */
    size_t size;
} Elem;

static const Elem ELEMS[] = {
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, "tensor(float)", "float32", "<f4", 4},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, "tensor(float16)", "float16", "<f2", 2},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, "tensor(double)", "float64", "<f8", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, "tensor(int8)", "int8", "|i1", 1},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, "tensor(uint8)", "uint8", "|u1", 1},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16, "tensor(int16)", "int16", "<i2", 2},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16, "tensor(uint16)", "uint16", "<u2", 2},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, "tensor(int32)", "int32", "<i4", 4},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, "tensor(uint32)", "uint32", "<u4", 4},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, "tensor(int64)", "int64", "<i8", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64, "tensor(uint64)", "uint64", "<u8", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, "tensor(bool)", "bool", "|b1", 1},
};

static const Elem *elem_of(ONNXTensorElementDataType type) {
    for (size_t i = 0; i < sizeof ELEMS / sizeof ELEMS[0]; i++)
        if (ELEMS[i].type == type) return &ELEMS[i];
    return NULL;
}

static const Elem *elem_of_descr(const char *descr) {
    for (size_t i = 0; i < sizeof ELEMS / sizeof ELEMS[0]; i++) {
        const char *mine = ELEMS[i].descr;
        /* '<' and '=' mean the same on a little-endian board; '|' is for one-byte types. */
        if (strcmp(mine + 1, descr + 1) == 0 && (descr[0] == mine[0] || descr[0] == '=' || descr[0] == '<'))
            return &ELEMS[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------ the run's state */

typedef struct {
    char *name;
    char *value;
} Pair;

typedef struct {
    const char *model;
    Pair shapes[MAX_ITEMS];
    int n_shapes;
    Pair inputs[MAX_ITEMS];
    int n_inputs;
    const char *ep;
    const char *opt_level;
    int intra, inter;
    const char *affinity;
    int main_cpu; /* -1: not pinned */
    int warmup, min_runs, max_runs;
    double min_duration;
    const char *save_outputs;
} Args;

typedef struct {
    Buf out;      /* the document under construction (an open JSON object) */
    const char *stage;
    char error[4096];
    const OrtApi *api;
} Run;

static int fail(Run *run, const char *stage, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    vsnprintf(run->error, sizeof run->error, fmt, args);
    va_end(args);
    run->stage = stage;
    return 1;
}

/* An OrtStatus turned into the run's error (and released); 0 when it was success. */
static int check(Run *run, OrtStatus *status, const char *stage, const char *what) {
    if (!status) return 0;
    fail(run, stage, "%s: %s", what, run->api->GetErrorMessage(status));
    run->api->ReleaseStatus(status);
    return 1;
}

/* A status nobody can act on (releasing a list): released, not reported. */
static void drop(const OrtApi *api, OrtStatus *status) {
    if (status) api->ReleaseStatus(status);
}

#define CHECK(call, stage, what) \
    do {                         \
        if (check(run, (call), (stage), (what))) return 1; \
    } while (0)

/* ------------------------------------------------------------------ arguments */

static int parse_int(const char *text, int *out) {
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || !end || *end || end == text || value < 0 || value > 100000000) return -1;
    *out = (int)value;
    return 0;
}

static int split_pair(char *text, Pair *pair) {
    char *eq = strchr(text, '=');
    if (!eq || eq == text || !eq[1]) return -1;
    *eq = '\0';
    pair->name = text;
    pair->value = eq + 1;
    return 0;
}

/* --ep's short names (the agent's), else the provider's full name as given. */
static const char *provider_of(const char *ep) {
    static const char *const aliases[][2] = {{"cpu", "CPUExecutionProvider"},
                                             {"xnnpack", XNNPACK_EP},
                                             {"cuda", "CUDAExecutionProvider"},
                                             {"tensorrt", "TensorrtExecutionProvider"}};
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcasecmp(ep, aliases[i][0])) return aliases[i][1];
    return ep;
}

static const char *USAGE =
    "usage: orch-runner --model PATH [--input NAME=PATH.npy] [--shape NAME=DxD] [--ep cpu|xnnpack|cuda|tensorrt]\n"
    "       [--opt-level disable|basic|extended|all] [--intra-op-threads N] [--inter-op-threads N]\n"
    "       [--affinity SPEC] [--main-cpu N] [--warmup N] [--min-runs N] [--min-duration S] [--max-runs N]\n"
    "       [--save-outputs DIR] | --version\n";

static int parse_args(Run *run, int argc, char **argv, Args *a) {
    *a = (Args){.ep = "cpu", .opt_level = "all", .main_cpu = -1, .warmup = 5, .min_runs = 50, .max_runs = 100000,
                .min_duration = 10.0};
    for (int i = 1; i < argc; i += 2) { /* every option takes one value */
        const char *opt = argv[i];
        char *value = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!value) return fail(run, "arguments", "%s needs a value", opt);
        if (!strcmp(opt, "--model")) a->model = value;
        else if (!strcmp(opt, "--ep")) a->ep = value;
        else if (!strcmp(opt, "--opt-level")) a->opt_level = value;
        else if (!strcmp(opt, "--affinity")) a->affinity = value;
        else if (!strcmp(opt, "--save-outputs")) a->save_outputs = value;
        else if (!strcmp(opt, "--intra-op-threads")) bad = parse_int(value, &a->intra);
        else if (!strcmp(opt, "--main-cpu")) bad = parse_int(value, &a->main_cpu);
        else if (!strcmp(opt, "--inter-op-threads")) bad = parse_int(value, &a->inter);
        else if (!strcmp(opt, "--warmup")) bad = parse_int(value, &a->warmup);
        else if (!strcmp(opt, "--min-runs")) bad = parse_int(value, &a->min_runs);
        else if (!strcmp(opt, "--max-runs")) bad = parse_int(value, &a->max_runs);
        else if (!strcmp(opt, "--min-duration")) {
            char *end = NULL;
            a->min_duration = strtod(value, &end);
            bad = !end || *end || !(a->min_duration >= 0);
        } else if (!strcmp(opt, "--shape") || !strcmp(opt, "--input")) {
            int shape = !strcmp(opt, "--shape");
            int *n = shape ? &a->n_shapes : &a->n_inputs;
            if (*n >= MAX_ITEMS) return fail(run, "arguments", "too many %s options", opt);
            if (split_pair(value, shape ? &a->shapes[*n] : &a->inputs[*n]))
                return fail(run, "arguments", "%s %s: expected %s", opt, value,
                            shape ? "NAME=DxDxD, e.g. input=1x3x224x224" : "NAME=PATH.npy");
            (*n)++;
        } else return fail(run, "arguments", "unknown option %s", opt);
        if (bad) return fail(run, "arguments", "%s %s: expected a whole number >= 0", opt, value);
    }
    if (!a->model) return fail(run, "arguments", "--model is required");
    if (a->max_runs < 1) return fail(run, "arguments", "--max-runs must be at least 1");
    const char *levels[] = {"disable", "basic", "extended", "all"};
    int known = 0;
    for (int i = 0; i < 4; i++) known |= !strcmp(a->opt_level, levels[i]);
    if (!known) return fail(run, "arguments", "--opt-level %s: choose from disable, basic, extended, all", a->opt_level);
    if (a->affinity && !strcmp(provider_of(a->ep), XNNPACK_EP))
        return fail(run, "arguments",
                    "--affinity places onnxruntime's intra-op pool threads, but with xnnpack that pool has 1 thread"
                    " and XNNPACK runs its own pool, which onnxruntime does not place: leave --affinity out");
    return 0;
}

/* ------------------------------------------------------------------ .npy files */

typedef struct {
    const Elem *elem;
    int64_t shape[16];
    size_t ndim;
    void *data;
    size_t bytes;
} Array;

static size_t element_count(const int64_t *shape, size_t ndim) {
    size_t count = 1;
    for (size_t i = 0; i < ndim; i++) count *= (size_t)shape[i];
    return count;
}

static int read_npy(Run *run, const char *path, Array *array) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(run, "inputs", "cannot open %s: %s", path, strerror(errno));
    unsigned char magic[10];
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "\x93NUMPY", 6);
    size_t header_len = 0;
    if (ok && magic[6] == 1) {
        ok = fread(magic + 8, 1, 2, f) == 2;
        header_len = (size_t)magic[8] | (size_t)magic[9] << 8;
    } else if (ok && (magic[6] == 2 || magic[6] == 3)) {
        unsigned char len[4];
        ok = fread(len, 1, 4, f) == 4;
        header_len = (size_t)len[0] | (size_t)len[1] << 8 | (size_t)len[2] << 16 | (size_t)len[3] << 24;
    } else ok = 0;
    char header[4096];
    if (!ok || header_len >= sizeof header || fread(header, 1, header_len, f) != header_len) {
        fclose(f);
        return fail(run, "inputs", "%s: not a .npy file (numpy.save writes them)", path);
    }
    header[header_len] = '\0';
    char descr[8] = "";
    const char *d = strstr(header, "'descr':");
    if (d) sscanf(d + 8, " '%7[^']'", descr);
    if (strstr(header, "'fortran_order': True")) {
        fclose(f);
        return fail(run, "inputs", "%s: Fortran-ordered arrays are not supported (save a C-ordered one)", path);
    }
    array->elem = elem_of_descr(descr);
    if (!array->elem) {
        fclose(f);
        return fail(run, "inputs", "%s: dtype %s is not supported", path, descr);
    }
    const char *s = strstr(header, "'shape':");
    s = s ? strchr(s, '(') : NULL;
    array->ndim = 0;
    while (s && *s && *s != ')') {
        s++;
        while (*s == ' ') s++;
        if (isdigit((unsigned char)*s)) {
            if (array->ndim >= 16) break;
            array->shape[array->ndim++] = strtoll(s, (char **)&s, 10);
        }
        while (*s && *s != ',' && *s != ')') s++;
    }
    array->bytes = element_count(array->shape, array->ndim) * array->elem->size;
    array->data = malloc(array->bytes ? array->bytes : 1);
    size_t got = array->bytes ? fread(array->data, 1, array->bytes, f) : 0;
    fclose(f);
    if (got != array->bytes) return fail(run, "inputs", "%s: truncated (%zu of %zu data bytes)", path, got, array->bytes);
    return 0;
}

static int write_npy(Run *run, const char *path, const Elem *elem, const int64_t *shape, size_t ndim,
                     const void *data) {
    char header[1024];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", elem->descr);
    for (size_t i = 0; i < ndim; i++) n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s",
                                                     (long long)shape[i], i + 1 < ndim ? " " : "");
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    /* Version 1.0: magic (6) + version (2) + length (2) + header, padded with spaces to 64 bytes, '\n' last. */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return fail(run, "outputs", "cannot write %s: %s", path, strerror(errno));
    size_t header_len = (size_t)n + pad + 1;
    unsigned char prefix[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(header_len & 0xff),
                                (unsigned char)(header_len >> 8)};
    fwrite(prefix, 1, 10, f);
    fwrite(header, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t bytes = element_count(shape, ndim) * elem->size;
    int ok = fwrite(data, 1, bytes, f) == bytes;
    ok &= fclose(f) == 0;
    return ok ? 0 : fail(run, "outputs", "cannot write %s", path);
}

/* ------------------------------------------------------------------ generated inputs */

/* A fixed generator (xorshift64*), so a generated input is the same on every run and board. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static double rng_uniform(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

static double rng_normal(void) {
    double u = rng_uniform(), v = rng_uniform();
    return sqrt(-2.0 * log(u > 0 ? u : 1e-300)) * cos(2.0 * M_PI * v);
}

static void fill(Array *array) {
    size_t count = element_count(array->shape, array->ndim);
    for (size_t i = 0; i < count; i++) {
        double value = array->elem->type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL ? (double)(rng_uniform() < 0.5)
                       : (array->elem->numpy[0] == 'f')                         ? rng_normal()
                                                                                 : floor(rng_uniform() * 8);
        char *p = (char *)array->data + i * array->elem->size;
        switch (array->elem->type) {
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: *(float *)p = (float)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: *(double *)p = value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: *(int8_t *)p = (int8_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: *(uint8_t *)p = (uint8_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: *(int16_t *)p = (int16_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: *(uint16_t *)p = (uint16_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: *(int32_t *)p = (int32_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: *(uint32_t *)p = (uint32_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: *(int64_t *)p = (int64_t)value; break;
        case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: *(uint64_t *)p = (uint64_t)value; break;
        default: {
            /* float16: value as half precision (round to nearest, no subnormals: inputs are ~N(0,1)). */
            float fv = (float)value;
            uint32_t bits;
            memcpy(&bits, &fv, 4);
            uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
            int exponent = (int)((bits >> 23) & 0xff) - 127 + 15;
            uint16_t half = exponent <= 0 ? sign
                            : exponent >= 31 ? (uint16_t)(sign | 0x7c00)
                                             : (uint16_t)(sign | exponent << 10 | ((bits >> 13) & 0x3ff));
            *(uint16_t *)p = half;
        }
        }
    }
}

static int parse_dims(const char *text, int64_t *shape, size_t *ndim) {
    *ndim = 0;
    const char *p = text;
    while (*p) {
        char *end = NULL;
        long long dim = strtoll(p, &end, 10);
        if (end == p || dim <= 0 || *ndim >= 16) return -1;
        shape[(*ndim)++] = dim;
        p = end;
        if (*p == 'x' || *p == 'X') p++;
        else if (*p) return -1;
    }
    return *ndim ? 0 : -1;
}

/* ------------------------------------------------------------------ statistics of the timed runs */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks, as numpy.percentile does by default (the agent uses it). */
static double percentile(const double *sorted, size_t n, double q) {
    double rank = q / 100.0 * (double)(n - 1);
    size_t low = (size_t)floor(rank);
    size_t high = low + 1 < n ? low + 1 : low;
    return sorted[low] + (sorted[high] - sorted[low]) * (rank - (double)low);
}

static void write_stats(Buf *b, const double *samples, size_t n, double duration) {
    double *sorted = malloc(n * sizeof *sorted);
    memcpy(sorted, samples, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double sum = 0, squares = 0;
    for (size_t i = 0; i < n; i++) sum += samples[i];
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) squares += (samples[i] - mean) * (samples[i] - mean);
    buf_key(b, "stats");
    buf_printf(b, "{\"n\":%zu", n);
    buf_key(b, "p50_ms"), buf_num(b, percentile(sorted, n, 50));
    buf_key(b, "p90_ms"), buf_num(b, percentile(sorted, n, 90));
    buf_key(b, "p99_ms"), buf_num(b, percentile(sorted, n, 99));
    buf_key(b, "mean_ms"), buf_num(b, mean);
    buf_key(b, "std_ms"), buf_num(b, n > 1 ? sqrt(squares / (double)(n - 1)) : 0.0);
    buf_key(b, "min_ms"), buf_num(b, sorted[0]);
    buf_key(b, "max_ms"), buf_num(b, sorted[n - 1]);
    buf_key(b, "throughput_ips"), buf_num(b, duration > 0 ? (double)n / duration : 0.0);
    buf_printf(b, "}");
    free(sorted);
}

/* ------------------------------------------------------------------ the measurement */

static const char *library_path(const void *symbol) {
    Dl_info info;
    return dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : NULL;
}

/* ORT's entry point from libonnxruntime.so.1 (a name without a slash: found through this program's
   RPATH, $ORIGIN/lib, then the usual search path). dlsym takes the library's default version of the
   symbol, whichever release it is, so the version check below can name both releases. */
typedef const OrtApiBase *(ORT_API_CALL *GetApiBaseFn)(void);

static const OrtApiBase *load_api_base(Run *run) {
    void *library = dlopen(ORCH_ORT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        fail(run, "library", "cannot load %s (ONNX Runtime %s): %s", ORCH_ORT_SONAME, ORCH_ORT_VERSION,
             dlerror());
        return NULL;
    }
    GetApiBaseFn get_api_base;
    /* POSIX's sanctioned way to turn dlsym's object pointer into a function pointer. */
    *(void **)(&get_api_base) = dlsym(library, "OrtGetApiBase");
    if (!get_api_base) {
        fail(run, "library", "%s has no OrtGetApiBase: it is not ONNX Runtime's C library", ORCH_ORT_SONAME);
        return NULL;
    }
    return get_api_base();
}

static int append_provider(Run *run, OrtSessionOptions *options, const char *name, int xnnpack_threads) {
    const OrtApi *api = run->api;
    if (!strcmp(name, "CPUExecutionProvider")) return 0;
    if (!strcmp(name, "CUDAExecutionProvider")) {
        OrtCUDAProviderOptionsV2 *cuda = NULL;
        CHECK(api->CreateCUDAProviderOptions(&cuda), "session", "CUDA provider options");
        OrtStatus *status = api->SessionOptionsAppendExecutionProvider_CUDA_V2(options, cuda);
        api->ReleaseCUDAProviderOptions(cuda);
        return check(run, status, "session", "adding the CUDA execution provider");
    }
    if (!strcmp(name, "TensorrtExecutionProvider")) {
        OrtTensorRTProviderOptionsV2 *trt = NULL;
        CHECK(api->CreateTensorRTProviderOptions(&trt), "session", "TensorRT provider options");
        OrtStatus *status = api->SessionOptionsAppendExecutionProvider_TensorRT_V2(options, trt);
        api->ReleaseTensorRTProviderOptions(trt);
        return check(run, status, "session", "adding the TensorRT execution provider");
    }
    if (!strcmp(name, XNNPACK_EP)) {
        char threads[16];
        snprintf(threads, sizeof threads, "%d", xnnpack_threads);
        const char *keys[] = {"intra_op_num_threads"}, *values[] = {threads};
        return check(run, api->SessionOptionsAppendExecutionProvider(options, "XNNPACK", keys, values, 1), "session",
                     "adding the XNNPACK execution provider");
    }
    /* The other providers the generic call knows, by their short name. */
    char short_name[128];
    snprintf(short_name, sizeof short_name, "%s", name);
    char *suffix = strstr(short_name, "ExecutionProvider");
    if (suffix) *suffix = '\0';
    return check(run, api->SessionOptionsAppendExecutionProvider(options, short_name, NULL, NULL, 0), "session",
                 "adding the execution provider");
}

/* Everything measured goes to ``b``, which the caller keeps only when the measurement succeeded (a
   failure part-way leaves it unfinished); the error and its stage are in ``run``. */
static int measure(Run *run, Buf *b, const Args *a, const Launch *launch, double main_ms) {
    const OrtApi *api = run->api;

    /* --main-cpu: the thread that calls Run on one CPU, before ORT makes its pool (placed by --affinity). */
    if (a->main_cpu >= 0) {
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        errno = EINVAL;
        if (a->main_cpu < CPU_SETSIZE) CPU_SET(a->main_cpu, &cpus);
        if (a->main_cpu >= CPU_SETSIZE || sched_setaffinity(0, sizeof cpus, &cpus) != 0)
            return fail(run, "arguments", "--pin-cores: CPU %d is not one this process may use here (%s)",
                        a->main_cpu, strerror(errno));
    }

    /* The model: size and sha256, so a result names exactly what was measured. */
    FILE *f = fopen(a->model, "rb");
    if (!f) return fail(run, "model", "model file not found: %s", a->model);
    Sha256 sha;
    sha_init(&sha);
    unsigned char chunk[1 << 16];
    size_t got, size = 0;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) sha_update(&sha, chunk, got), size += got;
    fclose(f);
    char hex[65];
    sha_hex(&sha, hex);
    const char *base = strrchr(a->model, '/');
    buf_key(b, "model");
    buf_printf(b, "{");
    buf_key(b, "path"), buf_str(b, a->model);
    buf_key(b, "name"), buf_str(b, base ? base + 1 : a->model);
    buf_key(b, "size"), buf_printf(b, "%zu", size);
    buf_key(b, "sha256"), buf_str(b, hex);

    /* Available providers, and the one asked for (the agent's aliases). */
    char **providers = NULL;
    int n_providers = 0;
    CHECK(api->GetAvailableProviders(&providers, &n_providers), "session", "listing the execution providers");
    const char *wanted = provider_of(a->ep);
    int available = 0;
    Buf list = {0};
    for (int i = 0; i < n_providers; i++) {
        available |= !strcmp(providers[i], wanted);
        buf_printf(&list, "%s%s", i ? ", " : "", providers[i]);
    }
    char wanted_copy[128];
    snprintf(wanted_copy, sizeof wanted_copy, "%s", wanted);
    if (!available) {
        fail(run, "session", "execution provider %s is not in this build (available: %s)", wanted_copy,
             list.data ? list.data : "");
        free(list.data);
        drop(api, api->ReleaseAvailableProviders(providers, n_providers));
        buf_printf(b, "}");
        return 1;
    }
    free(list.data);

    /* The XNNPACK EP's documentation: its own pool contends with ORT's, so ORT's pool gets 1 thread and no
       spinning, XNNPACK's the threads asked for. 0 (ORT's default, one per core) would leave XNNPACK on
       ORT's 1 thread: it gets the CPUs this process may use instead, and the document says so. */
    int xnnpack = !strcmp(wanted_copy, XNNPACK_EP);
    int intra = xnnpack ? 1 : a->intra;
    int xnnpack_threads = a->intra;
    cpu_set_t usable;
    if (xnnpack && !xnnpack_threads)
        xnnpack_threads = sched_getaffinity(0, sizeof usable, &usable) == 0 ? CPU_COUNT(&usable)
                                                                            : (int)sysconf(_SC_NPROCESSORS_ONLN);

    OrtEnv *env = NULL;
    OrtSessionOptions *options = NULL;
    OrtSession *session = NULL;
    double begin = mono_s();
    if (check(run, api->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "orch-runner", &env), "session", "creating the environment") ||
        check(run, api->CreateSessionOptions(&options), "session", "session options") ||
        check(run, api->SetIntraOpNumThreads(options, intra), "session", "intra-op threads") ||
        check(run, api->SetInterOpNumThreads(options, a->inter), "session", "inter-op threads")) {
        buf_printf(b, "}");
        return 1;
    }
    GraphOptimizationLevel level = !strcmp(a->opt_level, "disable")    ? ORT_DISABLE_ALL
                                   : !strcmp(a->opt_level, "basic")    ? ORT_ENABLE_BASIC
                                   : !strcmp(a->opt_level, "extended") ? ORT_ENABLE_EXTENDED
                                                                       : ORT_ENABLE_ALL;
    if (check(run, api->SetSessionGraphOptimizationLevel(options, level), "session", "graph optimisation level") ||
        (a->affinity && check(run, api->AddSessionConfigEntry(options, "session.intra_op_thread_affinities", a->affinity),
                              "session", "thread affinity")) ||
        (xnnpack && check(run, api->AddSessionConfigEntry(options, "session.intra_op.allow_spinning", "0"), "session",
                          "intra-op spinning")) ||
        append_provider(run, options, wanted_copy, xnnpack_threads) ||
        check(run, api->CreateSession(env, a->model, options, &session), "session", "cannot create a session")) {
        drop(api, api->ReleaseAvailableProviders(providers, n_providers));
        buf_printf(b, "}");
        return 1;
    }
    double session_s = mono_s() - begin;
    double session_ms = since_launch_ms(launch);
    drop(api, api->ReleaseAvailableProviders(providers, n_providers));

    /* Inputs: from .npy files, else generated from the model's metadata (free dimensions = 1). */
    OrtAllocator *allocator = NULL;
    CHECK(api->GetAllocatorWithDefaultOptions(&allocator), "inputs", "allocator");
    size_t n_in = 0, n_out = 0;
    CHECK(api->SessionGetInputCount(session, &n_in), "inputs", "input count");
    CHECK(api->SessionGetOutputCount(session, &n_out), "inputs", "output count");
    if (n_in > MAX_ITEMS || n_out > MAX_ITEMS) return fail(run, "inputs", "more than %d inputs or outputs", MAX_ITEMS);
    char *in_names[MAX_ITEMS], *out_names[MAX_ITEMS];
    OrtValue *inputs[MAX_ITEMS] = {0}, *outputs[MAX_ITEMS] = {0};
    OrtMemoryInfo *memory = NULL;
    CHECK(api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &memory), "inputs", "memory info");
    for (size_t i = 0; i < n_in; i++) CHECK(api->SessionGetInputName(session, i, allocator, &in_names[i]), "inputs", "input name");
    for (size_t i = 0; i < n_out; i++) CHECK(api->SessionGetOutputName(session, i, allocator, &out_names[i]), "inputs", "output name");
    for (int k = 0; k < a->n_shapes + a->n_inputs; k++) {
        const char *name = k < a->n_shapes ? a->shapes[k].name : a->inputs[k - a->n_shapes].name;
        int known = 0;
        for (size_t i = 0; i < n_in; i++) known |= !strcmp(name, in_names[i]);
        if (!known) return fail(run, "inputs", "the model has no input '%s'", name);
    }
    buf_key(b, "inputs");
    buf_printf(b, "[");
    for (size_t i = 0; i < n_in; i++) {
        OrtTypeInfo *type_info = NULL;
        const OrtTensorTypeAndShapeInfo *tensor = NULL;
        ONNXTensorElementDataType type;
        size_t ndim = 0;
        int64_t dims[16];
        CHECK(api->SessionGetInputTypeInfo(session, i, &type_info), "inputs", "input type");
        CHECK(api->CastTypeInfoToTensorInfo(type_info, &tensor), "inputs", "input type");
        if (!tensor) return fail(run, "inputs", "input '%s' is not a tensor", in_names[i]);
        CHECK(api->GetTensorElementType(tensor, &type), "inputs", "input element type");
        CHECK(api->GetDimensionsCount(tensor, &ndim), "inputs", "input rank");
        if (ndim > 16) return fail(run, "inputs", "input '%s' has more than 16 dimensions", in_names[i]);
        CHECK(api->GetDimensions(tensor, dims, ndim), "inputs", "input shape");
        const char *symbolic[16] = {0};
        CHECK(api->GetSymbolicDimensions(tensor, symbolic, ndim), "inputs", "input dimension names");
        const Elem *elem = elem_of(type);
        Array array = {0};
        const char *source = "model-metadata";
        const char *file = NULL, *shape_text = NULL;
        for (int k = 0; k < a->n_inputs; k++) if (!strcmp(a->inputs[k].name, in_names[i])) file = a->inputs[k].value;
        for (int k = 0; k < a->n_shapes; k++) if (!strcmp(a->shapes[k].name, in_names[i])) shape_text = a->shapes[k].value;
        if (file) {
            if (read_npy(run, file, &array)) return 1;
            if (!elem || array.elem->type != elem->type)
                return fail(run, "inputs", "%s holds %s, input '%s' is %s", file, array.elem->numpy, in_names[i],
                            elem ? elem->onnx : "of another type");
            source = "npy";
        } else {
            if (!elem) return fail(run, "inputs", "input '%s' has element type %d; give it as --input NAME=file.npy", in_names[i], (int)type);
            array.elem = elem;
            if (shape_text) {
                if (parse_dims(shape_text, array.shape, &array.ndim))
                    return fail(run, "arguments", "--shape %s=%s: expected NAME=DxDxD", in_names[i], shape_text);
                if (array.ndim != ndim)
                    return fail(run, "inputs", "--shape %s: %zu dims given, the model has %zu", in_names[i], array.ndim, ndim);
                source = "shape-option";
            } else {
                array.ndim = ndim;
                for (size_t d = 0; d < ndim; d++) array.shape[d] = dims[d] > 0 ? dims[d] : 1;
            }
            array.bytes = element_count(array.shape, array.ndim) * elem->size;
            array.data = malloc(array.bytes ? array.bytes : 1);
            fill(&array);
        }
        CHECK(api->CreateTensorWithDataAsOrtValue(memory, array.data, array.bytes, array.shape, array.ndim,
                                                  array.elem->type, &inputs[i]),
              "inputs", "input tensor");
        buf_sep(b);
        buf_printf(b, "{");
        buf_key(b, "name"), buf_str(b, in_names[i]);
        buf_key(b, "model_type"), buf_str(b, elem ? elem->onnx : "unknown");
        buf_key(b, "model_shape"), buf_printf(b, "[");
        for (size_t d = 0; d < ndim; d++) {
            buf_sep(b);
            if (dims[d] > 0) buf_printf(b, "%lld", (long long)dims[d]);
            else buf_str(b, symbolic[d] && *symbolic[d] ? symbolic[d] : "?");
        }
        buf_printf(b, "]");
        buf_key(b, "dtype"), buf_str(b, array.elem->numpy);
        buf_key(b, "shape"), buf_printf(b, "[");
        for (size_t d = 0; d < array.ndim; d++) buf_sep(b), buf_printf(b, "%lld", (long long)array.shape[d]);
        buf_printf(b, "]");
        buf_key(b, "source"), buf_str(b, source);
        buf_printf(b, "}");
        api->ReleaseTypeInfo(type_info);
    }
    buf_printf(b, "]");
    buf_key(b, "outputs");
    buf_printf(b, "[");
    for (size_t i = 0; i < n_out; i++) {
        OrtTypeInfo *type_info = NULL;
        const OrtTensorTypeAndShapeInfo *tensor = NULL;
        buf_sep(b);
        buf_printf(b, "{");
        buf_key(b, "name"), buf_str(b, out_names[i]);
        CHECK(api->SessionGetOutputTypeInfo(session, i, &type_info), "inputs", "output type");
        CHECK(api->CastTypeInfoToTensorInfo(type_info, &tensor), "inputs", "output type");
        if (tensor) {
            ONNXTensorElementDataType type;
            size_t ndim = 0;
            int64_t dims[16];
            CHECK(api->GetTensorElementType(tensor, &type), "inputs", "output element type");
            CHECK(api->GetDimensionsCount(tensor, &ndim), "inputs", "output rank");
            if (ndim > 16) ndim = 16;
            CHECK(api->GetDimensions(tensor, dims, ndim), "inputs", "output shape");
            const Elem *elem = elem_of(type);
            buf_key(b, "type"), buf_str(b, elem ? elem->onnx : "unknown");
            buf_key(b, "shape"), buf_printf(b, "[");
            for (size_t d = 0; d < ndim; d++) {
                buf_sep(b);
                if (dims[d] > 0) buf_printf(b, "%lld", (long long)dims[d]);
                else buf_str(b, "?");
            }
            buf_printf(b, "]");
        }
        buf_printf(b, "}");
        api->ReleaseTypeInfo(type_info);
    }
    buf_printf(b, "]}"); /* closes "model" */

    buf_key(b, "session");
    buf_printf(b, "{");
    buf_key(b, "providers"), buf_printf(b, "["), buf_str(b, wanted_copy);
    if (strcmp(wanted_copy, "CPUExecutionProvider")) buf_printf(b, ","), buf_str(b, "CPUExecutionProvider");
    buf_printf(b, "]");
    buf_key(b, "requested_ep"), buf_str(b, a->ep);
    buf_key(b, "opt_level"), buf_str(b, a->opt_level);
    buf_key(b, "graph_optimization_level"),
        buf_str(b, level == ORT_DISABLE_ALL ? "ORT_DISABLE_ALL" : level == ORT_ENABLE_BASIC ? "ORT_ENABLE_BASIC"
                   : level == ORT_ENABLE_EXTENDED ? "ORT_ENABLE_EXTENDED" : "ORT_ENABLE_ALL");
    buf_key(b, "intra_op_num_threads"), buf_printf(b, "%d", intra);
    buf_key(b, "inter_op_num_threads"), buf_printf(b, "%d", a->inter);
    buf_key(b, "xnnpack_threads");
    if (xnnpack) buf_printf(b, "%d", xnnpack_threads);
    else buf_printf(b, "null");
    buf_key(b, "intra_op_thread_affinities"), buf_str(b, a->affinity);
    buf_key(b, "main_cpu");
    if (a->main_cpu >= 0) buf_printf(b, "%d", a->main_cpu);
    else buf_printf(b, "null");
    buf_printf(b, "}");

    /* First result, warm-up, then timed runs until BOTH --min-runs and --min-duration are reached. */
    double t = mono_s();
    OrtStatus *status = api->Run(session, NULL, (const char *const *)in_names, (const OrtValue *const *)inputs, n_in,
                                 (const char *const *)out_names, n_out, outputs);
    double first_ms = (mono_s() - t) * 1000.0;
    double first_result_ms = since_launch_ms(launch);
    if (check(run, status, "inference", "inference failed")) return 1;
    if (a->save_outputs) {
        for (size_t i = 0; i < n_out; i++) {
            OrtTensorTypeAndShapeInfo *info = NULL;
            ONNXTensorElementDataType type;
            size_t ndim = 0;
            int64_t dims[16];
            void *data = NULL;
            CHECK(api->GetTensorTypeAndShape(outputs[i], &info), "outputs", "output shape");
            CHECK(api->GetTensorElementType(info, &type), "outputs", "output type");
            CHECK(api->GetDimensionsCount(info, &ndim), "outputs", "output rank");
            if (ndim > 16) return fail(run, "outputs", "output '%s' has more than 16 dimensions", out_names[i]);
            CHECK(api->GetDimensions(info, dims, ndim), "outputs", "output shape");
            api->ReleaseTensorTypeAndShapeInfo(info);
            const Elem *elem = elem_of(type);
            if (!elem) return fail(run, "outputs", "output '%s' has element type %d, not saved", out_names[i], (int)type);
            CHECK(api->GetTensorMutableData(outputs[i], &data), "outputs", "output data");
            char path[4096];
            snprintf(path, sizeof path, "%s/%s.npy", a->save_outputs, out_names[i]);
            if (write_npy(run, path, elem, dims, ndim, data)) return 1;
        }
    }
    for (size_t i = 0; i < n_out; i++) api->ReleaseValue(outputs[i]), outputs[i] = NULL;

    double warm_begin = mono_s();
    for (int i = 0; i < a->warmup; i++) {
        CHECK(api->Run(session, NULL, (const char *const *)in_names, (const OrtValue *const *)inputs, n_in,
                       (const char *const *)out_names, n_out, outputs),
              "inference", "inference failed");
        for (size_t k = 0; k < n_out; k++) api->ReleaseValue(outputs[k]), outputs[k] = NULL;
    }
    double warm_s = mono_s() - warm_begin;
    size_t cap = 1024, n = 0;
    double *latencies = malloc(cap * sizeof *latencies);
    double timed_begin = mono_s();
    while ((n < (size_t)a->min_runs || mono_s() - timed_begin < a->min_duration) && n < (size_t)a->max_runs) {
        double s = mono_s();
        CHECK(api->Run(session, NULL, (const char *const *)in_names, (const OrtValue *const *)inputs, n_in,
                       (const char *const *)out_names, n_out, outputs),
              "inference", "inference failed");
        if (n == cap) latencies = realloc(latencies, (cap *= 2) * sizeof *latencies);
        latencies[n++] = (mono_s() - s) * 1000.0;
        for (size_t k = 0; k < n_out; k++) api->ReleaseValue(outputs[k]), outputs[k] = NULL;
    }
    double duration = mono_s() - timed_begin;

    buf_key(b, "timing");
    buf_printf(b, "{");
    buf_key(b, "launch_source"), buf_str(b, launch->source);
    buf_key(b, "launch_to_main_ms"), buf_num(b, main_ms);
    buf_key(b, "launch_to_session_ms"), buf_num(b, session_ms);
    buf_key(b, "launch_to_first_result_ms"), buf_num(b, first_result_ms);
    buf_key(b, "session_create_s"), buf_num(b, session_s);
    buf_key(b, "first_inference_ms"), buf_num(b, first_ms);
    buf_key(b, "warmup_runs"), buf_printf(b, "%d", a->warmup);
    buf_key(b, "warmup_s"), buf_num(b, warm_s);
    buf_key(b, "runs"), buf_printf(b, "%zu", n);
    buf_key(b, "duration_s"), buf_num(b, duration);
    buf_key(b, "latencies_ms"), buf_printf(b, "[");
    for (size_t i = 0; i < n; i++) buf_sep(b), buf_num(b, latencies[i]);
    buf_printf(b, "]}");
    if (n) write_stats(b, latencies, n, duration);
    free(latencies);
    /* The session and its tensors live until the process ends: tearing them down is not measured. */
    return 0;
}

static void board_facts(Buf *b) {
    struct utsname u;
    buf_key(b, "board");
    buf_printf(b, "{\"before\":{");
    if (uname(&u) == 0) {
        buf_key(b, "hostname"), buf_str(b, u.nodename);
        buf_key(b, "kernel"), buf_str(b, u.release);
        buf_key(b, "machine"), buf_str(b, u.machine);
    }
    buf_key(b, "online_cores"), buf_printf(b, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    buf_printf(b, "}}");
}

int main(int argc, char **argv) {
    Launch launch = launch_origin();
    double main_ms = since_launch_ms(&launch);
    double wall_begin = mono_s();
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        printf("orch-runner for ONNX Runtime %s (C API %d)\n", ORCH_ORT_VERSION, ORT_API_VERSION);
        return 0;
    }
    Run run = {0};
    Buf *b = &run.out;
    buf_printf(b, "{");
    buf_key(b, "schema"), buf_str(b, SCHEMA);
    buf_key(b, "runner");
    buf_printf(b, "{");
    buf_key(b, "built_for"), buf_str(b, ORCH_ORT_VERSION);
    buf_key(b, "api_version"), buf_printf(b, "%d", ORT_API_VERSION);
    buf_key(b, "compiler"), buf_str(b, "gcc " __VERSION__);
    buf_key(b, "executable"), buf_str(b, argv[0]);
    buf_printf(b, "}");
    buf_key(b, "argv"), buf_printf(b, "[");
    for (int i = 1; i < argc; i++) buf_sep(b), buf_str(b, argv[i]);
    buf_printf(b, "]");

    int code = 0;
    Args args;
    const OrtApiBase *base = NULL;
    if (argc < 2 || parse_args(&run, argc, argv, &args)) {
        if (!run.stage) fail(&run, "arguments", "--model is required");
        fputs(USAGE, stderr);
        code = 2;
    } else if (!(base = load_api_base(&run))) {
        code = 1;
    } else {
        /* The library's version first: nothing of its API is used before it is known to be the release
           this runner was compiled for. */
        const char *version = base->GetVersionString();
        const char *where = library_path((const void *)base->GetVersionString);
        buf_key(b, "ort");
        buf_printf(b, "{");
        buf_key(b, "version"), buf_str(b, version);
        buf_key(b, "library"), buf_str(b, where);
        buf_printf(b, "}");
        if (strcmp(version, ORCH_ORT_VERSION) != 0) {
            fail(&run, "version",
                 "this runner was built for ONNX Runtime %s but loaded the library of ONNX Runtime %s (%s): "
                 "deploy the runner built with that release, or put libonnxruntime %s next to it",
                 ORCH_ORT_VERSION, version, where ? where : "?", ORCH_ORT_VERSION);
            code = 1;
        } else {
            run.api = base->GetApi(ORT_API_VERSION);
            if (!run.api) {
                fail(&run, "version", "the library does not offer C API version %d", ORT_API_VERSION);
                code = 1;
            } else {
                board_facts(b);
                Buf measured = {0};
                code = measure(&run, &measured, &args, &launch, main_ms);
                if (code == 0 && measured.len) {
                    buf_sep(b);
                    buf_grow(b, measured.len);
                    memcpy(b->data + b->len, measured.data, measured.len);
                    b->len += measured.len;
                }
            }
        }
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    buf_key(b, "ok"), buf_printf(b, code == 0 ? "true" : "false");
    if (code) {
        buf_key(b, "error"), buf_str(b, run.error);
        buf_key(b, "stage"), buf_str(b, run.stage);
    }
    buf_key(b, "memory"), buf_printf(b, "{\"peak_rss_kb\":%ld}", usage.ru_maxrss);
    buf_key(b, "runner_wall_s"), buf_num(b, mono_s() - wall_begin);
    buf_printf(b, "}\n");
    fwrite(b->data, 1, b->len, stdout);
    fflush(stdout);
    /* _exit: the document is out; ORT's static destructors and thread pools are no part of the result. */
    _exit(code);
}
