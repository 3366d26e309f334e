/*
 * Driver of dev/rowdot-paired: two builds of the native row-dots (scorch_cpu.c at two revisions, linked side by side
 * as a_* and b_* by the script) take turns in one process, slice by slice, on the same weights, so that a shared
 * machine's drift hits both alike; then both run once on the same copy and their outputs are compared bit for bit.
 *
 *   rowdot-paired FORMAT K N THREADS ROUNDS M SUBNORMALS CACHED
 *
 * FORMAT bf16, fp8 (128 x 128 blocks of fp32 scales) or int4 (groups of 32, BF16 scales, Kimi K2's); weights are random
 * bytes, cycled through 64 MiB of copies (CACHED 1: one copy, which the caches hold); FP8 NaN codes are replaced, and
 * E4M3 subnormal codes too unless SUBNORMALS is 1 (a real checkpoint has about one in 10^4; random bytes one in 16,
 * each of which slows a multiply on some CPUs). Rows split evenly over THREADS, whole blocks of four.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define KERNELS(v)                                                                                                   \
  void v##_int4(const unsigned char*, int, int, int, const unsigned char*, int, int, int, const float*, const float*, \
                int, float*, int, float*);                                                                           \
  void v##_fp8(const unsigned char*, int, int, int, const float*, int, int, int, const float*, int, float*, int);     \
  void v##_bf16(const unsigned char*, int, int, const float*, const float*, int, float*, int);
KERNELS(a)
KERNELS(b)

enum { BF16, FP8, INT4 };
static int format, K, N, M, threads, copies, build;
static unsigned char *w, *scales;
static float *x, *xs, *y[2], *scaleInv;
static size_t matBytes, scaleBytes;
static int copy;
static volatile int generation, done;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void part(int t) {
  int per = (N / threads + 3) / 4 * 4, r0 = t * per, rows = r0 + per > N ? N - r0 : per;
  if (rows <= 0) return;
  const unsigned char* wc = w + matBytes * (size_t)copy;
  float* yb = y[build] + r0;
  if (format == INT4) {
    static __thread float* sw;
    if (!sw) sw = malloc(4 * (size_t)(4 * (K / 8 + K / 32)) + 64);
    const unsigned char* sc = scales + scaleBytes * (size_t)copy + (size_t)r0 * (K / 32) * 2;
    (build ? b_int4 : a_int4)(wc + (size_t)r0 * (K / 2), K / 8, K, rows, sc, 1, K / 32, 32, xs, x, M, yb, N, sw);
  } else if (format == FP8) {
    (build ? b_fp8 : a_fp8)(wc + (size_t)r0 * K, K, rows, r0, scaleInv, (K + 127) / 128, 128, 128, x, M, yb, N);
  } else {
    (build ? b_bf16 : a_bf16)(wc + (size_t)r0 * K * 2, K, rows, xs, x, M, yb, N);
  }
}

static void* helper(void* arg) {
  int t = (int)(long)arg, seen = 0;
  for (;;) {
    while (__atomic_load_n(&generation, __ATOMIC_ACQUIRE) == seen) {
    }
    seen++;
    part(t);
    __atomic_fetch_add(&done, 1, __ATOMIC_ACQ_REL);
  }
  return NULL;
}

static void call(void) {
  done = 0;
  __atomic_fetch_add(&generation, 1, __ATOMIC_ACQ_REL);
  part(0);
  while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != threads - 1) {
  }
}

static int less(const void* p, const void* q) {
  double u = *(const double*)p, v = *(const double*)q;
  return u < v ? -1 : u > v;
}

/* GB/s of the median call in a slice of about 0.3 s, the copies taken in turn. */
static double slice(void) {
  static double t[200000];
  int n = 0;
  double t0 = now();
  while (now() - t0 < 0.3 && n < 200000) {
    copy = (copy + 1) % copies;
    double s = now();
    call();
    t[n++] = now() - s;
  }
  qsort(t, n, sizeof(double), less);
  return (matBytes + scaleBytes) / t[n / 2] / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 9) {
    fprintf(stderr, "usage: rowdot-paired FORMAT K N THREADS ROUNDS M SUBNORMALS CACHED\n");
    return 2;
  }
  format = !strcmp(argv[1], "fp8") ? FP8 : !strcmp(argv[1], "int4") ? INT4 : BF16;
  K = atoi(argv[2]), N = atoi(argv[3]), threads = atoi(argv[4]);
  int rounds = atoi(argv[5]), subnormals = atoi(argv[7]), cached = atoi(argv[8]);
  M = atoi(argv[6]);
  if (K < 32 || K % 32 || N < 4 || threads < 1 || threads > 64 || rounds < 1 || rounds > 999 || M < 1) {
    fprintf(stderr, "rowdot-paired: K a multiple of 32, N >= 4, 1-64 threads, 1-999 rounds, M >= 1\n");
    return 2;
  }
  matBytes = format == BF16 ? 2 * (size_t)K * N : format == FP8 ? (size_t)K * N : (size_t)K * N / 2;
  scaleBytes = format == INT4 ? (size_t)N * (K / 32) * 2 : 0;
  copies = cached ? 1 : (int)((64 << 20) / (matBytes + scaleBytes)) + 2;
  w = mmap(NULL, matBytes * copies, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  srand(1);
  for (size_t i = 0; i < matBytes * copies; i++) {
    unsigned char c = (unsigned char)rand();
    if (format == FP8 && (c & 0x7f) == 0x7f) c ^= 1;                 /* no NaN codes */
    if (format == FP8 && !subnormals && (c & 0x78) == 0) c |= 0x08;  /* no E4M3 subnormals (nor zeros) */
    w[i] = c;
  }
  if (format == BF16) { /* finite weights of a trained model's size, either sign */
    unsigned short* h = (unsigned short*)w;
    for (size_t i = 0; i < matBytes * copies / 2; i++) h[i] = (unsigned short)(0x3c00 + rand() % 0x400) ^ (rand() & 0x8000);
  }
  if (scaleBytes) {
    scales = malloc(scaleBytes * copies);
    for (size_t i = 0; i < scaleBytes * copies / 2; i++) {
      float f = 0.01f * (1 + rand() % 100);
      unsigned int bits;
      memcpy(&bits, &f, 4);
      ((unsigned short*)scales)[i] = (unsigned short)(bits >> 16);
    }
  }
  scaleInv = malloc(sizeof(float) * ((N + 127) / 128) * ((K + 127) / 128));
  for (int i = 0; i < ((N + 127) / 128) * ((K + 127) / 128); i++) scaleInv[i] = 0.001f * (1 + i % 7);
  x = malloc(4 * (size_t)K * M), xs = malloc(4 * (size_t)K * M);
  y[0] = malloc(4 * (size_t)N * M), y[1] = malloc(4 * (size_t)N * M);
  for (size_t k = 0; k < (size_t)K * M; k++) x[k] = (rand() % 1000 - 500) * 0.001f;
  for (int i = 0; i < M; i++) { /* the x the Java side splits: by phase for INT4, even/odd for BF16 */
    const float* xi = x + (size_t)i * K;
    float* si = xs + (size_t)i * K;
    for (int k = 0; k < K; k++) si[k] = format == INT4 ? xi[8 * (k % (K / 8)) + k / (K / 8)] : k < K / 2 ? xi[2 * k] : xi[2 * (k - K / 2) + 1];
  }
  for (int t = 1; t < threads; t++) {
    pthread_t th;
    pthread_create(&th, NULL, helper, (void*)(long)t);
  }
  double gb[2][1000], ratio[1000];
  for (int r = 0; r < rounds; r++) { /* the first build of a round alternates */
    build = r & 1;
    gb[build][r] = slice();
    build = !build;
    gb[build][r] = slice();
    ratio[r] = gb[1][r] / gb[0][r];
  }
  copy = 0;
  build = 0;
  call();
  build = 1;
  call();
  int same = !memcmp(y[0], y[1], 4 * (size_t)N * M);
  qsort(gb[0], rounds, sizeof(double), less);
  qsort(gb[1], rounds, sizeof(double), less);
  qsort(ratio, rounds, sizeof(double), less);
  printf("%s %dx%d, M %d, %d threads, %d rounds%s: A %.2f GB/s, B %.2f GB/s (medians); B/A %.3f (rounds %.3f-%.3f); "
         "outputs %s\n",
         argv[1], K, N, M, threads, rounds, cached ? ", cached" : "", gb[0][rounds / 2], gb[1][rounds / 2],
         ratio[rounds / 2], ratio[0], ratio[rounds - 1], same ? "bit for bit the same" : "DIFFER");
  return same ? 0 : 1;
}
