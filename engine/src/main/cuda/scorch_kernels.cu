// Scorch's own CUDA kernels: everything of the DeepSeek-V3 forward pass that is not a GEMM (cuBLAS does those).
// Built by engine/src/main/cuda/build.sh with nvcc for sm_90 (+ compute_90 PTX) into a fatbin the jar carries;
// dev.scorch.engine.gpu.cuda.CudaDevice loads it and launches these by name. Each kernel has a plain Java twin
// in dev.scorch.engine.gpu.HostDevice, which the tests compare with the CPU model.
//
// Layouts are row-major and named as in the model code: [T, hidden], [T, heads, q_head_dim], ...
// Every reduction is in fp32 (log-sum-exp in fp64), softmax in fp32.

#include <cuda_bf16.h>
#include <float.h>
#include <stdint.h>

#define BLOCK 256
#define MAX_EXPERTS 512

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float part[32];
  __shared__ float total;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < (blockDim.x >> 5) ? part[lane] : 0.f;
    s = warp_sum(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  float r = total;
  __syncthreads();
  return r;
}

__device__ float block_max(float v) {
  __shared__ float part[32];
  __shared__ float total;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float s = lane < (blockDim.x >> 5) ? part[lane] : -FLT_MAX;
    s = warp_max(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  float r = total;
  __syncthreads();
  return r;
}

// out[r, :dim] = weight * x[r * stride + offset ..][:dim] * rsqrt(mean(x^2) + eps). grid: rows.
extern "C" __global__ void rms_norm(const float* x, int stride, int offset, int dim, const float* weight, float eps,
                                    float* out) {
  const float* xr = x + (long)blockIdx.x * stride + offset;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss);
  float inv = rsqrtf(ss / dim + eps);
  float* o = out + (long)blockIdx.x * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
}

// Rotates pairs (2i, 2i+1) of x[r * row_stride + h * head_stride + offset ..][:rope_dim] by the angle of the
// row's position; cos_sin[pos, 2i] = cos, [pos, 2i+1] = sin (mscale included). grid: rows, block: heads * rope_dim/2.
extern "C" __global__ void rope(float* x, int heads, int row_stride, int head_stride, int offset, int rope_dim,
                                const int* positions, const float* cos_sin) {
  int half = rope_dim / 2;
  int r = blockIdx.x;
  const float* cs = cos_sin + (long)positions[r] * rope_dim;
  for (int k = threadIdx.x; k < heads * half; k += blockDim.x) {
    int h = k / half, i = k % half;
    float* p = x + (long)r * row_stride + h * head_stride + offset + 2 * i;
    float x0 = p[0], x1 = p[1], c = cs[2 * i], s = cs[2 * i + 1];
    p[0] = x0 * c - x1 * s;
    p[1] = x1 * c + x0 * s;
  }
}

// dst[r * dst_stride + dst_off + c] = src[r * src_stride + src_off + c], c < width. grid: rows.
extern "C" __global__ void copy_cols(const float* src, int src_stride, int src_off, int width, float* dst, int dst_stride,
                                     int dst_off) {
  const float* s = src + (long)blockIdx.x * src_stride + src_off;
  float* d = dst + (long)blockIdx.x * dst_stride + dst_off;
  for (int c = threadIdx.x; c < width; c += blockDim.x) d[c] = s[c];
}

// x += y over n elements.
extern "C" __global__ void add_inplace(float* x, const float* y, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) x[i] += y[i];
}

// SwiGLU over fused gate/up rows: out[r, c] = silu(gu[r, c]) * gu[r, inter + c], gu [rows, 2 * inter]. grid: rows.
extern "C" __global__ void swiglu(const float* gu, int inter, float* out) {
  const float* g = gu + (long)blockIdx.x * 2 * inter;
  float* o = out + (long)blockIdx.x * inter;
  for (int c = threadIdx.x; c < inter; c += blockDim.x) {
    float a = g[c];
    o[c] = a / (1.f + expf(-a)) * g[inter + c];
  }
}

// GEMM inputs in BF16 (round to nearest even).
extern "C" __global__ void to_bf16(const float* x, __nv_bfloat16* out, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    out[i] = __float2bfloat16_rn(x[i]);
}

// out[j, :] = x[rows[j], :]. grid: n rows.
extern "C" __global__ void gather_rows(const float* x, const int* rows, int width, float* out) {
  const float* s = x + (long)rows[blockIdx.x] * width;
  float* d = out + (long)blockIdx.x * width;
  for (int c = threadIdx.x; c < width; c += blockDim.x) d[c] = s[c];
}

// y[rows[j], :] += weights[j] * ye[j, :]. Rows are distinct within one call (a token picks an expert once),
// and calls run in expert order on one stream, so each token's sum has the CPU's order. grid: n rows.
extern "C" __global__ void scatter_add_rows(float* y, const int* rows, const float* weights, int width, const float* ye) {
  float* d = y + (long)rows[blockIdx.x] * width;
  const float* s = ye + (long)blockIdx.x * width;
  float w = weights[blockIdx.x];
  for (int c = threadIdx.x; c < width; c += blockDim.x) d[c] += w * s[c];
}

// MLA attention, prefill form, varlen and causal through per-query key ranges:
// q [T, heads, qk_nope + qk_rope] (rope applied), kv [K, heads, qk_nope + v_head] = [k_nope | v],
// k_pe [K, qk_rope] shared by all heads; query i attends keys key_start[i] .. key_start[i] + key_len[i) - 1.
// out [T, heads, v_head]. grid: (T, heads), block: ATTN_WARPS warps. Warp w takes keys w, w + ATTN_WARPS, ...:
// its lanes split each key's dims (coalesced loads), a shuffle reduction gives the score, and an online softmax
// in fp32 keeps the warp's max, sum and v accumulator (lane d owns dims d, d + 32, ...); the warps' partial
// results are merged at the end. v_head <= 32 * ATTN_VREGS.
#define ATTN_WARPS 4
#define ATTN_VREGS 4
extern "C" __global__ void mla_attention(const float* q, const float* kv, const float* k_pe, const int* key_start,
                                         const int* key_len, int heads, int qk_nope, int qk_rope, int v_head, float scale,
                                         float* out) {
  extern __shared__ float smem[];
  int q_head = qk_nope + qk_rope;
  int kv_head = qk_nope + v_head;
  float* qs = smem;                                    // [q_head]
  float* part_m = qs + q_head;                         // [ATTN_WARPS]
  float* part_l = part_m + ATTN_WARPS;                 // [ATTN_WARPS]
  float* part_acc = part_l + ATTN_WARPS;               // [ATTN_WARPS, v_head]
  int i = blockIdx.x, h = blockIdx.y;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* qi = q + ((long)i * heads + h) * q_head;
  for (int d = threadIdx.x; d < q_head; d += blockDim.x) qs[d] = qi[d] * scale;
  __syncthreads();
  int k0 = key_start[i], len = key_len[i];
  float m = -FLT_MAX, l = 0.f;
  float acc[ATTN_VREGS];
#pragma unroll
  for (int r = 0; r < ATTN_VREGS; r++) acc[r] = 0.f;
  for (int j = warp; j < len; j += ATTN_WARPS) {
    const float* kj = kv + ((long)(k0 + j) * heads + h) * kv_head;
    const float* pj = k_pe + (long)(k0 + j) * qk_rope;
    float dot = 0.f;
    for (int d = lane; d < qk_nope; d += 32) dot += qs[d] * kj[d];
    for (int d = lane; d < qk_rope; d += 32) dot += qs[qk_nope + d] * pj[d];
    float s = warp_sum(dot);
    float m_new = fmaxf(m, s);
    float alpha = expf(m - m_new);
    float p = expf(s - m_new);
    l = l * alpha + p;
    const float* vj = kj + qk_nope;
#pragma unroll
    for (int r = 0; r < ATTN_VREGS; r++) {
      int d = lane + 32 * r;
      if (d < v_head) acc[r] = acc[r] * alpha + p * vj[d];
    }
    m = m_new;
  }
  if (lane == 0) {
    part_m[warp] = m;
    part_l[warp] = l;
  }
#pragma unroll
  for (int r = 0; r < ATTN_VREGS; r++) {
    int d = lane + 32 * r;
    if (d < v_head) part_acc[warp * v_head + d] = acc[r];
  }
  __syncthreads();
  float mx = -FLT_MAX;
  for (int w = 0; w < ATTN_WARPS; w++) mx = fmaxf(mx, part_m[w]);
  float total = 0.f;
  for (int w = 0; w < ATTN_WARPS; w++) total += part_l[w] * expf(part_m[w] - mx);
  float* o = out + ((long)i * heads + h) * v_head;
  for (int d = threadIdx.x; d < v_head; d += blockDim.x) {
    float a = 0.f;
    for (int w = 0; w < ATTN_WARPS; w++) a += part_acc[w * v_head + d] * expf(part_m[w] - mx);
    o[d] = a / total;
  }
}

// noaux_tc router, one thread per token, as dev.scorch.engine.model.MoeRouter: sigmoid scores; choice = score +
// bias; keep the topk_group groups with the largest top-2 sum; top_k experts by choice (lowest index wins ties);
// weights are the chosen scores, normalised when norm_topk_prob, times routed_scaling_factor. experts/weights
// [T, top_k] in ascending expert id.
extern "C" __global__ void moe_route(const float* logits, const float* bias, int t, int n_experts, int top_k, int n_group,
                                     int topk_group, int norm_topk_prob, float routed_scaling_factor, int* experts,
                                     float* weights) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= t) return;
  float scores[MAX_EXPERTS];
  float choice[MAX_EXPERTS];
  bool chosen[MAX_EXPERTS];
  int per_group = n_experts / n_group;
  for (int e = 0; e < n_experts; e++) {
    scores[e] = 1.f / (1.f + expf(-logits[(long)i * n_experts + e]));
    choice[e] = scores[e] + bias[e];
    chosen[e] = false;
  }
  float group_score[64];
  bool keep[64];
  for (int g = 0; g < n_group; g++) {
    float best = -FLT_MAX, second = -FLT_MAX;
    for (int e = g * per_group; e < (g + 1) * per_group; e++) {
      if (choice[e] > best) { second = best; best = choice[e]; }
      else if (choice[e] > second) second = choice[e];
    }
    group_score[g] = per_group == 1 ? best : best + second;
    keep[g] = false;
  }
  for (int k = 0; k < topk_group; k++) {
    int b = -1;
    for (int g = 0; g < n_group; g++)
      if (!keep[g] && (b < 0 || group_score[g] > group_score[b])) b = g;
    keep[b] = true;
  }
  for (int e = 0; e < n_experts; e++)
    if (!keep[e / per_group]) choice[e] = 0.f;
  for (int k = 0; k < top_k; k++) {
    int b = -1;
    for (int e = 0; e < n_experts; e++)
      if (!chosen[e] && (b < 0 || choice[e] > choice[b])) b = e;
    chosen[b] = true;
  }
  float sum = 0.f;
  int k = 0;
  for (int e = 0; e < n_experts; e++)
    if (chosen[e]) {
      experts[(long)i * top_k + k] = e;
      weights[(long)i * top_k + k] = scores[e];
      sum += scores[e];
      k++;
    }
  for (k = 0; k < top_k; k++) {
    float w = weights[(long)i * top_k + k];
    if (top_k > 1 && norm_topk_prob) w = w / (sum + 1e-20f);
    weights[(long)i * top_k + k] = w * routed_scaling_factor;
  }
}

// Per logits row: stats[r] = {log-sum-exp (sum in fp64), logits[r, targets[r]] (0 when targets[r] < 0),
// argmax (lowest index on ties)}. grid: rows.
extern "C" __global__ void log_softmax_stats(const float* logits, int vocab, const int* targets, float* stats) {
  __shared__ float best_v[BLOCK];
  __shared__ int best_i[BLOCK];
  __shared__ double part[BLOCK];
  const float* row = logits + (long)blockIdx.x * vocab;
  float bv = -FLT_MAX;
  int bi = 0x7fffffff;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    float x = row[v];
    if (x > bv) { bv = x; bi = v; }  // v ascends per thread: the first max wins within a thread
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      float ov = best_v[threadIdx.x + s];
      int oi = best_i[threadIdx.x + s];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  float mx = best_v[0];
  double sum = 0.0;
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) sum += exp((double)row[v] - (double)mx);
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    int tg = targets[blockIdx.x];
    stats[3L * blockIdx.x] = (float)((double)mx + log(part[0]));
    stats[3L * blockIdx.x + 1] = tg >= 0 ? row[tg] : 0.f;
    stats[3L * blockIdx.x + 2] = (float)best_i[0];
  }
}

// GEMM inputs as BF16 parts: p0 = bf16(x), p1 = bf16(x - p0), p2 = bf16(x - p0 - p1) (parts 1..3 written);
// p0 + p1 carry 16 mantissa bits of x, p0 + p1 + p2 all 24.
extern "C" __global__ void split_bf16(const float* x, __nv_bfloat16* p0, __nv_bfloat16* p1, __nv_bfloat16* p2, int parts,
                                      long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float r = x[i];
    __nv_bfloat16 a = __float2bfloat16_rn(r);
    p0[i] = a;
    if (parts > 1) {
      r -= __bfloat162float(a);
      __nv_bfloat16 b = __float2bfloat16_rn(r);
      p1[i] = b;
      if (parts > 2) p2[i] = __float2bfloat16_rn(r - __bfloat162float(b));
    }
  }
}

// out[j, :] = table[rows[j], :] widened from BF16 (the token embedding lookup). grid: n rows.
extern "C" __global__ void gather_rows_bf16(const __nv_bfloat16* table, const int* rows, int width, float* out) {
  const __nv_bfloat16* s = table + (long)rows[blockIdx.x] * width;
  float* d = out + (long)blockIdx.x * width;
  for (int c = threadIdx.x; c < width; c += blockDim.x) d[c] = __bfloat162float(s[c]);
}
