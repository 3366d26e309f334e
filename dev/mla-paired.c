/*
 * dev/mla-paired's driver: two builds of decode's absorbed attention kernel (mla_absorbed_bf16 in scorch_cpu.c), each
 * a shared library exporting run_mla, taking turns round by round in one process on the small demo model's shapes (16
 * heads, qk_nope 64, qk_rope 32, v_head 64, kv_lora_rank 256), one thread. Prints the median microseconds a layer of
 * each and the median of the rounds' old/new ratios, and says so where the two builds' outputs differ in any bit.
 *
 *   mla-paired LIB_OLD LIB_NEW [LEN [G [COLD]]]   COLD: 0 all in cache, 1 weights and caches cycled through 64
 *                                                 layers (~80 MB), 2 only the weights cycled, 3 only the caches
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef void (*mla_fn)(const unsigned short*, int, int, int, int, int, float, const float*, int, const float*, int, int, float*, int, float*);
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmpd(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mla-paired LIB_OLD LIB_NEW [LEN [G [COLD]]]\n");
    return 2;
  }
  int len = argc > 3 ? atoi(argv[3]) : 192, G = argc > 4 ? atoi(argv[4]) : 4, cold = argc > 5 ? atoi(argv[5]) : 0;
  int heads = 16, nope = 64, rope = 32, vHead = 64, rank = 256, stride = rank + rope;
  void* ho = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  void* hn = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (!ho || !hn) {
    fprintf(stderr, "mla-paired: %s\n", dlerror());
    return 2;
  }
  mla_fn f[2] = {(mla_fn)dlsym(ho, "run_mla"), (mla_fn)dlsym(hn, "run_mla")};
  int layers = cold ? 64 : 1; /* cold: cycle through 64 layers' weights and caches (~80 MB) */
  size_t wn = (size_t)heads * (nope + vHead) * rank;
  unsigned short* w = malloc(wn * 2 * layers);
  for (size_t i = 0; i < wn * layers; i++) w[i] = 0x3c00 + (rand() & 0xff) - 128 + ((rand() & 1) << 15);
  float* cache = malloc(sizeof(float) * (size_t)len * stride * layers);
  for (size_t i = 0; i < (size_t)len * stride * layers; i++) cache[i] = rand() / (float)RAND_MAX - 0.5f;
  float q[16 * 96], out[2][16 * 64];
  float* scratch = malloc(sizeof(float) * 16 * (512 + ((size_t)len + 7) / 8 * 8));
  for (int i = 0; i < 16 * 96; i++) q[i] = rand() / (float)RAND_MAX - 0.5f;
  int rounds = 21, iters = cold ? 64 : 200;
  double t[2][21];
  for (int r = -1; r < rounds; r++) {
    for (int k = 0; k < 2; k++) {
      int v = (r & 1) ? 1 - k : k;
      double t0 = now();
      for (int it = 0; it < iters; it++) {
        int L = it % layers;
        for (int h = 0; h < heads; h += G)
          f[v](w + (cold == 3 ? 0 : L) * wn + (size_t)h * (nope + vHead) * rank, G, nope, rope, vHead, rank, 0.1f, q + h * 96, 96,
               cache + (size_t)(cold == 2 ? 0 : L) * len * stride, stride, len, out[v] + h * 64, 64, scratch);
      }
      if (r >= 0) t[v][r] = (now() - t0) / iters * 1e6;
    }
  }
  if (memcmp(out[0], out[1], sizeof(out[0])) != 0) printf("OUTPUTS DIFFER\n");
  double ratio[21];
  for (int r = 0; r < rounds; r++) ratio[r] = t[0][r] / t[1][r];
  qsort(t[0], rounds, sizeof(double), cmpd); qsort(t[1], rounds, sizeof(double), cmpd); qsort(ratio, rounds, sizeof(double), cmpd);
  printf("len %d G %d %s: old %.1f us, new %.1f us a layer; old/new %.3f (%.3f-%.3f)\n", len, G, cold == 0 ? "warm" : cold == 1 ? "cold" : cold == 2 ? "cold weights" : "cold cache", t[0][10], t[1][10], ratio[10], ratio[0], ratio[20]);
}
