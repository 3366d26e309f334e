// Scorch's own CUDA kernels: everything of the DeepSeek-V3 forward pass that is not a GEMM (cuBLAS does those).
// Built by engine/src/main/cuda/build.sh with nvcc for sm_90 (+ compute_90 PTX) into a fatbin the jar carries;
// dev.scorch.engine.device.cuda.CudaDevice loads it and launches these by name. Each kernel has a plain Java twin
// in dev.scorch.engine.device.host.HostDevice, which the tests compare with the CPU model.
//
// Layouts are row-major and named as in the model code: [T, hidden], [T, heads, q_head_dim], ...
// Every reduction is in fp32 (log-sum-exp in fp64), softmax in fp32.

#include <cuda_bf16.h>
#include <mma.h>
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

// kv_a_layernorm and the key's RoPE in one launch: latent[r, :rank] as rms_norm of x[r * stride + offset ..][:rank], and
// k_pe[r, :rope_dim] = x[r * stride + offset + rank ..][:rope_dim] rotated as rope rotates it. grid: rows.
// Twin: HostDevice.rmsNormRope (rmsNorm, copyCols, rope).
extern "C" __global__ void rms_norm_rope(const float* x, int stride, int offset, int rank, const float* weight, float eps,
                                         int rope_dim, const int* positions, const float* cos_sin, float* latent,
                                         float* k_pe) {
  const float* xr = x + (long)blockIdx.x * stride + offset;
  float ss = 0.f;
  for (int i = threadIdx.x; i < rank; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss);
  float inv = rsqrtf(ss / rank + eps);
  float* o = latent + (long)blockIdx.x * rank;
  for (int i = threadIdx.x; i < rank; i += blockDim.x) o[i] = weight[i] * (xr[i] * inv);
  const float* cs = cos_sin + (long)positions[blockIdx.x] * rope_dim;
  const float* pe = xr + rank;
  float* kp = k_pe + (long)blockIdx.x * rope_dim;
  for (int i = threadIdx.x; i < rope_dim / 2; i += blockDim.x) {
    float x0 = pe[2 * i], x1 = pe[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
    kp[2 * i] = x0 * c - x1 * s;
    kp[2 * i + 1] = x1 * c + x0 * s;
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

// MLA attention, prefill form, varlen and causal through per-query key ranges:
// q [T, heads, qk_nope + qk_rope] (rope applied), kv [K, heads, qk_nope + v_head] = [k_nope | v],
// k_pe [K, qk_rope] shared by all heads; query i attends keys key_start[i] .. key_start[i] + key_len[i) - 1.
// out [T, heads, v_head].
//
// One block per (query tile, head); tiles[2t] is the first query row of tile t and tiles[2t + 1] its row count
// (<= ATTN_Q): consecutive queries of one sequence, so they share key_start and their key ranges only grow.
// Key tiles of ATTN_K keys (k_nope | k_pe, and v) are staged in shared memory once for all the tile's queries.
// Thread (row r = tid / 8, lane8 = tid % 8) scores keys lane8 * 2, + 1 of each key tile for query r, keeps the
// row's online-softmax max and sum in fp32 (8-lane shuffles), and accumulates v dims lane8 + 8j.
#define ATTN_Q 16
#define ATTN_K 16
#define ATTN_THREADS 128
#define ATTN_MAX_QK 192
#define ATTN_MAX_V 128
extern "C" __global__ void __launch_bounds__(ATTN_THREADS) mla_attention(
    const float* q, const float* kv, const float* k_pe, const int* key_start, const int* key_len, const int* tiles,
    int heads, int qk_nope, int qk_rope, int v_head, float scale, float* out) {
  __shared__ float qs[ATTN_Q][ATTN_MAX_QK + 1];
  __shared__ float ks[ATTN_K][ATTN_MAX_QK + 1];
  __shared__ float vs[ATTN_K][ATTN_MAX_V];
  __shared__ float ps[ATTN_Q][ATTN_K + 1];
  int q_head = qk_nope + qk_rope;
  int kv_head = qk_nope + v_head;
  int q0 = tiles[2 * blockIdx.x], nq = tiles[2 * blockIdx.x + 1];
  int h = blockIdx.y;
  int tid = threadIdx.x, r = tid >> 3, lane8 = tid & 7;
  for (int idx = tid; idx < nq * q_head; idx += ATTN_THREADS) {
    int qi = idx / q_head, d = idx % q_head;
    qs[qi][d] = q[((long)(q0 + qi) * heads + h) * q_head + d] * scale;
  }
  int k0 = key_start[q0];
  int my_len = r < nq ? key_len[q0 + r] : 0;
  int max_len = key_len[q0 + nq - 1];
  float m = -INFINITY, l = 0.f;
  float acc[ATTN_MAX_V / 8];
#pragma unroll
  for (int j = 0; j < ATTN_MAX_V / 8; j++) acc[j] = 0.f;
  for (int t0 = 0; t0 < max_len; t0 += ATTN_K) {
    int nk = min(ATTN_K, max_len - t0);
    __syncthreads();  // the previous tile's keys and values are no longer read
    for (int idx = tid; idx < nk * q_head; idx += ATTN_THREADS) {
      int j = idx / q_head, d = idx % q_head;
      long key = k0 + t0 + j;
      ks[j][d] = d < qk_nope ? kv[(key * heads + h) * kv_head + d] : k_pe[key * qk_rope + d - qk_nope];
    }
    for (int idx = tid; idx < nk * v_head; idx += ATTN_THREADS) {
      int j = idx / v_head, d = idx % v_head;
      vs[j][d] = kv[((long)(k0 + t0 + j) * heads + h) * kv_head + qk_nope + d];
    }
    __syncthreads();
    // Scores of this thread's two keys for query r; keys past the query's range count as -inf.
    float s[2];
#pragma unroll
    for (int u = 0; u < 2; u++) {
      int j = lane8 * 2 + u;
      float dot = -INFINITY;
      if (r < nq && j < nk && t0 + j < my_len) {
        dot = 0.f;
        for (int d = 0; d < q_head; d++) dot += qs[r][d] * ks[j][d];
      }
      s[u] = dot;
    }
    float tile_max = fmaxf(s[0], s[1]);
    for (int o = 4; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    float m_new = fmaxf(m, tile_max);
    float alpha = m_new == -INFINITY ? 1.f : expf(m - m_new);
    float p0 = s[0] == -INFINITY ? 0.f : expf(s[0] - m_new);
    float p1 = s[1] == -INFINITY ? 0.f : expf(s[1] - m_new);
    float psum = p0 + p1;
    for (int o = 4; o > 0; o >>= 1) psum += __shfl_xor_sync(0xffffffffu, psum, o);
    l = l * alpha + psum;
    m = m_new;
    ps[r][lane8 * 2] = p0;
    ps[r][lane8 * 2 + 1] = p1;
    __syncwarp();
#pragma unroll
    for (int jv = 0; jv < ATTN_MAX_V / 8; jv++) {
      int d = lane8 + 8 * jv;
      if (d < v_head) {
        float a = acc[jv] * alpha;
        for (int j = 0; j < nk; j++) a += ps[r][j] * vs[j][d];
        acc[jv] = a;
      }
    }
  }
  if (r < nq) {
    float* o = out + ((long)(q0 + r) * heads + h) * v_head;
#pragma unroll
    for (int jv = 0; jv < ATTN_MAX_V / 8; jv++) {
      int d = lane8 + 8 * jv;
      if (d < v_head) o[d] = acc[jv] / l;
    }
  }
}

// MLA attention, absorbed form (decode), for the rows new tokens of one sequence over its latent cache, which already
// holds them: q [rows, heads, qk_nope + qk_rope] (rope applied), cache [past + rows, kv_lora_rank + qk_rope] = [c | k_pe]
// per token, w = kv_b_proj [heads * (qk_nope + v_head), kv_lora_rank] in fp32 or BF16 (W_UK of head h: rows
// h * (qk_nope + v_head) + d, d < qk_nope; W_UV: the v_head rows after them). Query i attends cache rows 0 .. past + i:
// q_latent = W_UK^T q_nope; score_j = (q_latent . c_j + q_pe . k_pe_j) * scale; softmax in fp32;
// o_latent = sum_j p_j c_j; out[i, h] = W_UV o_latent. out [rows, heads, v_head]. Twin: HostDevice.mlaDecode.
//
// One block per (query, head). Its threads compute q_latent (per element an FMA chain over d, HostDevice's order);
// warp k then takes keys k, k + DEC_WARPS, ... with its own online softmax (max, sum, and o_latent in shared memory,
// lane owning elements lane + 32n); the warps' partials are merged, and each warp computes W_UV rows e = warp + ....
// Dynamic shared memory: (DEC_WARPS + 1) * kv_lora_rank + qk_rope floats.
#define DEC_THREADS 256
#define DEC_WARPS (DEC_THREADS / 32)

__device__ __forceinline__ float weight_at(const float* w, long i) { return w[i]; }
__device__ __forceinline__ float weight_at(const __nv_bfloat16* w, long i) { return __bfloat162float(w[i]); }

// Query qi of head h over cache rows 0 .. len - 1 into oi [v_head].
template <typename W>
__device__ void mla_decode_query(const float* qi, const float* cache, int len, const W* w, int h, int qk_nope,
                                 int qk_rope, int v_head, int rank, float scale, float* oi) {
  extern __shared__ float dec_smem[];
  float* lat = dec_smem;                     // [rank]: q_latent, then o_latent
  float* o_part = dec_smem + rank;           // [DEC_WARPS, rank]: each warp's unnormalised o_latent
  float* q_pe = o_part + DEC_WARPS * rank;   // [qk_rope]
  __shared__ float m_part[DEC_WARPS], l_part[DEC_WARPS];
  int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int width = rank + qk_rope;
  const W* wk = w + (long)h * (qk_nope + v_head) * rank;  // W_UK [qk_nope, rank]
  const W* wv = wk + (long)qk_nope * rank;                 // W_UV [v_head, rank]
  for (int d = tid; d < qk_rope; d += DEC_THREADS) q_pe[d] = qi[qk_nope + d];
  for (int c = tid; c < rank; c += DEC_THREADS) {
    float a = 0.f;
    for (int d = 0; d < qk_nope; d++) a = fmaf(qi[d], weight_at(wk, (long)d * rank + c), a);
    lat[c] = a;
  }
  float* o = o_part + warp * rank;
  for (int c = lane; c < rank; c += 32) o[c] = 0.f;
  __syncthreads();
  float m = -INFINITY, l = 0.f;
  for (int j = warp; j < len; j += DEC_WARPS) {
    const float* cj = cache + (long)j * width;
    float s = 0.f;
    for (int c = lane; c < rank; c += 32) s = fmaf(lat[c], cj[c], s);
    for (int d = lane; d < qk_rope; d += 32) s = fmaf(q_pe[d], cj[rank + d], s);
    s = warp_sum(s) * scale;
    float m_new = fmaxf(m, s);
    float alpha = expf(m - m_new);  // 0 at the warp's first key (m = -inf)
    float p = expf(s - m_new);
    l = l * alpha + p;
    m = m_new;
    for (int c = lane; c < rank; c += 32) o[c] = fmaf(p, cj[c], o[c] * alpha);
  }
  if (lane == 0) {
    m_part[warp] = m;
    l_part[warp] = l;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int k = 0; k < DEC_WARPS; k++) mx = fmaxf(mx, m_part[k]);  // finite: warp 0 has key 0
  float sum = 0.f;
  for (int k = 0; k < DEC_WARPS; k++) sum += l_part[k] * expf(m_part[k] - mx);  // warps without keys add 0
  float inv = 1.f / sum;
  for (int c = tid; c < rank; c += DEC_THREADS) {
    float a = 0.f;
    for (int k = 0; k < DEC_WARPS; k++) a = fmaf(o_part[k * rank + c], expf(m_part[k] - mx), a);
    lat[c] = a * inv;
  }
  __syncthreads();
  for (int e = warp; e < v_head; e += DEC_WARPS) {
    float a = 0.f;
    for (int c = lane; c < rank; c += 32) a = fmaf(weight_at(wv, (long)e * rank + c), lat[c], a);
    a = warp_sum(a);
    if (lane == 0) oi[e] = a;
  }
}

// Query i = blockIdx.x (causal: cache rows 0 .. past + i), head h = blockIdx.y.
template <typename W>
__device__ void mla_decode(const float* q, const float* cache, int past, const W* w, int heads, int qk_nope,
                           int qk_rope, int v_head, int rank, float scale, float* out) {
  int i = blockIdx.x, h = blockIdx.y;
  mla_decode_query(q + ((long)i * heads + h) * (qk_nope + qk_rope), cache, past + i + 1, w, h, qk_nope, qk_rope, v_head,
                   rank, scale, out + ((long)i * heads + h) * v_head);
}

// A decode step's rows, one new token each, lengths and caches read here so that a captured graph serves every step:
// row r = blockIdx.x over caches[r] (its layer's cache, which holds lengths[r] tokens and then the row's own), head h
// = blockIdx.y; each row's bits are mla_decode's with past lengths[r]. Twin: HeapDevice.mlaDecodeRows.
template <typename W>
__device__ void mla_decode_rows(const float* q, const float* const* caches, const int* lengths, const W* w, int heads,
                                int qk_nope, int qk_rope, int v_head, int rank, float scale, float* out) {
  int r = blockIdx.x, h = blockIdx.y;
  mla_decode_query(q + ((long)r * heads + h) * (qk_nope + qk_rope), caches[r], lengths[r] + 1, w, h, qk_nope, qk_rope,
                   v_head, rank, scale, out + ((long)r * heads + h) * v_head);
}

// grid: (rows, heads), block: DEC_THREADS.
extern "C" __global__ void __launch_bounds__(DEC_THREADS) mla_decode_f32(
    const float* q, const float* cache, int past, const float* w, int heads, int qk_nope, int qk_rope, int v_head,
    int rank, float scale, float* out) {
  mla_decode(q, cache, past, w, heads, qk_nope, qk_rope, v_head, rank, scale, out);
}

extern "C" __global__ void __launch_bounds__(DEC_THREADS) mla_decode_bf16(
    const float* q, const float* cache, int past, const __nv_bfloat16* w, int heads, int qk_nope, int qk_rope,
    int v_head, int rank, float scale, float* out) {
  mla_decode(q, cache, past, w, heads, qk_nope, qk_rope, v_head, rank, scale, out);
}

// grid: (rows, heads), block: DEC_THREADS.
extern "C" __global__ void __launch_bounds__(DEC_THREADS) mla_decode_rows_f32(
    const float* q, const float* const* caches, const int* lengths, const float* w, int heads, int qk_nope, int qk_rope,
    int v_head, int rank, float scale, float* out) {
  mla_decode_rows(q, caches, lengths, w, heads, qk_nope, qk_rope, v_head, rank, scale, out);
}

extern "C" __global__ void __launch_bounds__(DEC_THREADS) mla_decode_rows_bf16(
    const float* q, const float* const* caches, const int* lengths, const __nv_bfloat16* w, int heads, int qk_nope,
    int qk_rope, int v_head, int rank, float scale, float* out) {
  mla_decode_rows(q, caches, lengths, w, heads, qk_nope, qk_rope, v_head, rank, scale, out);
}

// A decode step's new latent and k_pe of row r = blockIdx.x into row lengths[r] of its cache caches[r] [capacity,
// rank + qk_rope], the position read here (a captured graph serves every step). Twin: HeapDevice.cacheAppend.
extern "C" __global__ void cache_append(const float* latent, const float* k_pe, int rank, int qk_rope,
                                        float* const* caches, const int* lengths) {
  int r = blockIdx.x;
  float* row = caches[r] + (long)lengths[r] * (rank + qk_rope);
  for (int c = threadIdx.x; c < rank; c += blockDim.x) row[c] = latent[(long)r * rank + c];
  for (int d = threadIdx.x; d < qk_rope; d += blockDim.x) row[rank + d] = k_pe[(long)r * qk_rope + d];
}

// MoE combine: y[t, :] = sum over k < top_k (experts in ascending id) of weights[t, k] * ye[slot[t, k], :], the
// order the CPU sums the experts in. grid: T.
// y[t, :] = sum_k weights[t, k] * ye[slot[t, k], :] in k order (the CPU's), then + addend[t, :] when addend is not
// null (the shared experts). grid: tokens.
extern "C" __global__ void moe_combine(const float* ye, const int* slot, const float* weights, int top_k, int width,
                                       const float* addend, float* y) {
  int t = blockIdx.x;
  for (int c = threadIdx.x; c < width; c += blockDim.x) {
    float a = 0.f;
    for (int k = 0; k < top_k; k++) a += weights[t * top_k + k] * ye[(long)slot[t * top_k + k] * width + c];
    if (addend) a += addend[(long)t * width + c];
    y[(long)t * width + c] = a;
  }
}

// noaux_tc router, one thread per token, line by line dev.scorch.engine.device.host.NoauxTcRouter (the one router every
// backend runs): sigmoid scores in double rounded to float; choice = score + bias; keep the topk_group groups with the
// largest top-2 sum (-inf to start); top_k experts by choice (lowest index wins ties); weights are the chosen scores,
// normalised when norm_topk_prob, times routed_scaling_factor. experts/weights [T, top_k] in ascending expert id.
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
    scores[e] = (float)(1.0 / (1.0 + exp(-(double)logits[(long)i * n_experts + e])));
    choice[e] = scores[e] + bias[e];
    chosen[e] = false;
  }
  float group_score[64];
  bool keep[64];
  for (int g = 0; g < n_group; g++) {
    float best = -INFINITY, second = -INFINITY;
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

// INT4 group-quantised weights (compressed-tensors pack-quantized) dequantised for a GEMM, one tile of weight rows at a
// time: elements [0, n) of the tile are W[row0 + i / k, i % k] with W[r, c] = q * scale[r, c / group_size], q = nibble
// c % 8 of packed word [r, c / 8] minus 8 (in [-8, 7]), the fp32 product as the CPU's Linear.row computes it. scales
// are BF16 (scale_bf16 = 1) or fp32. Twins: HostDevice.int4Dequant.
__device__ __forceinline__ float int4_weight(const int* packed, const void* scales, int scale_bf16, int words, int groups,
                                             int group_size, int k, long row0, long i) {
  long r = row0 + i / k;
  int c = (int)(i % k);
  unsigned word = (unsigned)packed[r * words + (c >> 3)];
  int q = (int)((word >> (4 * (c & 7))) & 15u) - 8;
  long g = r * groups + c / group_size;
  float s = scale_bf16 ? __bfloat162float(((const __nv_bfloat16*)scales)[g]) : ((const float*)scales)[g];
  return __fmul_rn((float)q, s);
}

// The tile in fp32 (the fp32 GEMM's weights).
extern "C" __global__ void int4_dequant_f32(const int* packed, const void* scales, int scale_bf16, int words, int groups,
                                            int group_size, int k, long row0, long n, float* out) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    out[i] = int4_weight(packed, scales, scale_bf16, words, groups, group_size, k, row0, i);
}

// The tile as BF16 parts: hi = bf16(W), and when want_lo, lo = bf16(W - hi) (0 where hi is not finite), so that
// hi + lo = W exactly when the scale has at most 13 significant bits (W then has at most 16).
extern "C" __global__ void int4_dequant_bf16(const int* packed, const void* scales, int scale_bf16, int words, int groups,
                                             int group_size, int k, long row0, long n, __nv_bfloat16* hi,
                                             __nv_bfloat16* lo, int want_lo) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float w = int4_weight(packed, scales, scale_bf16, words, groups, group_size, k, row0, i);
    __nv_bfloat16 h = __float2bfloat16_rn(w);
    hi[i] = h;
    if (want_lo) {
      float hf = __bfloat162float(h);
      lo[i] = isfinite(hf) ? __float2bfloat16_rn(__fsub_rn(w, hf)) : __float2bfloat16_rn(0.f);
    }
  }
}

// FP8 E4M3 block-scaled weights (DeepSeek's weight_scale_inv, compressed-tensors' float-quantized weight_scale)
// dequantised for a GEMM, one tile of weight rows at a time: elements [0, n) of the tile are W[row0 + i / k, i % k] with
// W[r, c] = e4m3(code[r, c]) * scales[scale_rows[r], c / block_cols], the fp32 product the CPU's Linear.row computes.
// codes are row-major bytes. Twins: HostDevice.fp8Dequant.
__device__ __forceinline__ float e4m3_to_float(unsigned code) {
  unsigned e = (code >> 3) & 15u, m = code & 7u;
  float v;
  if (e == 15u && m == 7u) {
    v = __int_as_float(0x7fc00000);  // 0x7F / 0xFF: NaN (E4M3FN has no infinities)
  } else if (e == 0u) {
    v = (float)m * 0.001953125f;  // subnormal: m * 2^-9, exact
  } else {
    v = __int_as_float((int)(((e + 120u) << 23) | (m << 20)));  // (1 + m / 8) * 2^(e - 7)
  }
  return (code & 0x80u) ? -v : v;
}

__device__ __forceinline__ float fp8_weight(const unsigned char* codes, const float* scales, const int* scale_rows,
                                            int scale_cols, int block_cols, int k, long row0, long i) {
  long r = row0 + i / k;
  int c = (int)(i % k);
  float s = scales[(long)scale_rows[r] * scale_cols + c / block_cols];
  return __fmul_rn(e4m3_to_float(codes[r * k + c]), s);
}

// The tile in fp32 (the fp32 GEMM's weights).
extern "C" __global__ void fp8_dequant_f32(const unsigned char* codes, const float* scales, const int* scale_rows,
                                           int scale_cols, int block_cols, int k, long row0, long n, float* out) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
    out[i] = fp8_weight(codes, scales, scale_rows, scale_cols, block_cols, k, row0, i);
}

// The tile as parts (1 to 3) BF16 parts, part a at out + a * stride bytes: w0 = bf16(W), w1 = bf16(W - w0),
// w2 = bf16(W - w0 - w1) (the later parts 0 where w0 is not finite). Three parts hold any fp32 W exactly, two when the
// scale has at most 12 significant bits (W then has at most 16).
extern "C" __global__ void fp8_dequant_bf16(const unsigned char* codes, const float* scales, const int* scale_rows,
                                            int scale_cols, int block_cols, int k, long row0, long n, char* out,
                                            long stride, int parts) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
    float w = fp8_weight(codes, scales, scale_rows, scale_cols, block_cols, k, row0, i);
    bool finite = true;
    for (int a = 0; a < parts; a++) {
      __nv_bfloat16 p = __float2bfloat16_rn(finite ? w : 0.f);
      ((__nv_bfloat16*)(out + a * stride))[i] = p;
      float pf = __bfloat162float(p);
      finite = finite && isfinite(pf);
      w = __fsub_rn(w, pf);
    }
  }
}

// MoE permutation, first half: offsets[e] = pairs routed to experts below e, offsets[n_experts] = pairs. One block: its
// threads count each expert's pairs in shared memory (integer adds, so the order does not matter), thread 0 scans.
extern "C" __global__ void moe_offsets(const int* experts, int pairs, int n_experts, int* offsets) {
  __shared__ int count[MAX_EXPERTS];
  for (int e = threadIdx.x; e < n_experts; e += blockDim.x) count[e] = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) atomicAdd(&count[experts[i]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    offsets[0] = 0;
    for (int e = 0; e < n_experts; e++) {
      s += count[e];
      offsets[e + 1] = s;
    }
  }
}

// MoE permutation, second half: block e gives expert e's pairs the slots offsets[e] .. in pair order (tokens in order,
// as a token routes to an expert at most once): a block-wide exclusive count of the earlier pairs of e, a chunk of
// blockDim pairs at a time (ballot within a warp, the warps' totals across). slot_of[pair] = its slot, slot_row[slot]
// = its token. grid: n_experts, block: BLOCK. Twin: HostDevice.moePermute.
extern "C" __global__ void moe_slots(const int* experts, int pairs, int top_k, const int* offsets, int* slot_of,
                                     int* slot_row) {
  __shared__ int warp_count[BLOCK / 32];
  int e = blockIdx.x;
  int base = offsets[e];
  if (offsets[e + 1] == base) return;  // the whole block: no pair chose e
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int p0 = 0; p0 < pairs; p0 += blockDim.x) {
    int p = p0 + threadIdx.x;
    bool mine = p < pairs && experts[p] == e;
    unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
      before += w < warp ? warp_count[w] : 0;
      total += warp_count[w];
    }
    if (mine) {
      int slot = base + before + __popc(ballot & ((1u << lane) - 1u));
      slot_of[p] = slot;
      slot_row[slot] = p / top_k;
    }
    base += total;
    __syncthreads();  // warp_count is rewritten by the next chunk
  }
}

// Row tiles of the experts' grouped GEMM: tile_start[e] = tiles of the experts below e, MG_TM slots a tile, a tile
// never spanning two experts; tile_start[n_experts] = all tiles. One thread.
#define MG_TM 64
#define MG_TN 64
#define MG_TK 16
extern "C" __global__ void moe_tile_starts(const int* offsets, int n_experts, int* tile_start) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  int s = 0;
  tile_start[0] = 0;
  for (int e = 0; e < n_experts; e++) {
    s += (offsets[e + 1] - offsets[e] + MG_TM - 1) / MG_TM;
    tile_start[e + 1] = s;
  }
}

// One expert's weights in the grouped GEMM's table: data (F32, BF16, INT4 packed words or FP8 codes), scales and scale
// rows for packed weights, and flags: bit 0 BF16 INT4 scales; bits 4-7 the weight's BF16 parts and bits 8-11 the
// input's (DequantPlan; both 0: fp32 products).
struct ExpertWeight {
  const void* data;
  const void* scales;
  const int* scale_rows;
  long long flags;
};

// meta: [0] kind (0 F32, 1 BF16, 2 INT4, 3 FP8), INT4 [1] words a row, [2] groups a row, [3] group size, FP8 [4] scale
// columns, [5] block columns. W[r, c] as the dequantisation kernels compute it.
__device__ __forceinline__ float expert_weight(const ExpertWeight& w, const int* meta, int k, long r, int c) {
  switch (meta[0]) {
    case 0:
      return ((const float*)w.data)[r * k + c];
    case 1:
      return __bfloat162float(((const __nv_bfloat16*)w.data)[r * k + c]);
    case 2:
      return int4_weight((const int*)w.data, w.scales, (int)(w.flags & 1), meta[1], meta[2], meta[3], k, r, c);
    default:
      return fp8_weight((const unsigned char*)w.data, (const float*)w.scales, w.scale_rows, meta[4], meta[5], k, r, c);
  }
}

// v as `parts` BF16 parts (p0 = bf16(v), p1 = bf16(v - p0), ...; later parts 0 once a part is not finite), widened
// back to fp32 into out[0 ..]; parts 0 keeps v itself (fp32 products).
__device__ __forceinline__ void bf16_parts(float v, int parts, float* out, int stride) {
  if (parts == 0) {
    out[0] = v;
    return;
  }
  bool finite = true;
  for (int a = 0; a < parts; a++) {
    float p = __bfloat162float(__float2bfloat16_rn(finite ? v : 0.f));
    out[a * stride] = p;
    finite = finite && isfinite(p);
    v = __fsub_rn(v, p);
  }
}

// Row tile blockIdx.x of the experts' grouped GEMM: its expert e (the last whose tiles start at or before it: an empty
// expert's start where the next one's do), first slot and rows. False past the last tile.
__device__ __forceinline__ bool moe_row_tile(const int* offsets, const int* tile_start, int n_experts, int* e, int* row0,
                                             int* rows) {
  int b = blockIdx.x;
  if (b >= tile_start[n_experts]) return false;
  int lo = 0, hi = n_experts - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (tile_start[mid] <= b) lo = mid; else hi = mid - 1;
  }
  *e = lo;
  *row0 = offsets[lo] + (b - tile_start[lo]) * MG_TM;
  *rows = min(MG_TM, offsets[lo + 1] - *row0);
  return true;
}

// The block's output tile [MG_TM, MG_TN] (in shared memory, synchronised) into y: its columns of y [slots, n]; or with
// swiglu_inter > 0, gate columns [0, MG_TN / 2) and their up columns after them, silu(gate) * up as the swiglu kernel
// computes it into y [slots, swiglu_inter].
__device__ __forceinline__ void moe_store(const float* tile, int row0, int rows, int n, int swiglu_inter, float* y) {
  if (swiglu_inter == 0) {
    int cols = min(MG_TN, n - (int)blockIdx.y * MG_TN);
    for (int i = threadIdx.x; i < MG_TM * MG_TN; i += blockDim.x) {
      int r = i / MG_TN, col = i % MG_TN;
      if (r < rows && col < cols) y[(long)(row0 + r) * n + blockIdx.y * MG_TN + col] = tile[i];
    }
    return;
  }
  int half = MG_TN / 2;
  for (int i = threadIdx.x; i < MG_TM * half; i += blockDim.x) {
    int r = i / half, g = i % half;
    int col = blockIdx.y * half + g;
    if (r < rows && col < swiglu_inter) {
      float a = tile[r * MG_TN + g];
      y[(long)(row0 + r) * swiglu_inter + col] = a / (1.f + expf(-a)) * tile[r * MG_TN + half + g];
    }
  }
}

// The weight row behind column j of column tile blockIdx.y: j itself, or with swiglu_inter > 0 gate row g for j < MG_TN / 2
// and up row swiglu_inter + g after (g the tile's gate column); false past the weight's rows.
__device__ __forceinline__ bool moe_weight_row(int j, int n, int swiglu_inter, long* row) {
  if (swiglu_inter > 0) {
    int half = MG_TN / 2;
    int g = blockIdx.y * half + (j % half);
    *row = j < half ? g : swiglu_inter + g;
    return g < swiglu_inter;
  }
  *row = (long)blockIdx.y * MG_TN + j;
  return *row < n;
}

// v as parts BF16 parts (p0 = bf16(v), p1 = bf16(v - p0), ...; the later parts 0 once one is not finite).
__device__ __forceinline__ void bf16_split(float v, int parts, __nv_bfloat16* out, int stride) {
  bool finite = true;
  for (int a = 0; a < parts; a++) {
    __nv_bfloat16 p = __float2bfloat16_rn(finite ? v : 0.f);
    out[a * stride] = p;
    float pf = __bfloat162float(p);
    finite = finite && isfinite(pf);
    v = __fsub_rn(v, pf);
  }
}

// All experts of a layer as one grouped GEMM, group bounds on the device (offsets from moe_slots' permutation): block
// (b, j) computes row tile b (tile_start says whose expert: tile b - tile_start[e] of expert e) times column tile j
// of y [slots, n] = x [slots, k] . w[e]^T, fp32 accumulate over k in MG_TK steps, with the products DequantPlan says
// (w_a . x_b for a < weight parts, b < input parts - a; or fp32). With swiglu_inter > 0, w[e] is gate|up
// [2 * swiglu_inter, k] and a column tile holds MG_TN / 2 gate columns and their up columns: the block writes
// silu(gate) * up to y [slots, swiglu_inter]. Tiles past the last expert's return at once (the grid is an upper
// bound the host knows without reading the routing). block: 256 threads, a 4 x 4 outputs each, on the CUDA cores (the
// fp32 plans; moe_gemm_bf16 runs the others). Twin: HostDevice.gemmExperts / gemmExpertsSwiglu (each expert's rows
// through gemm).
extern "C" __global__ void __launch_bounds__(256) moe_gemm(const float* x, const int* offsets, const int* tile_start,
                                                           int n_experts, const ExpertWeight* table, const int* meta,
                                                           int k, int n, int swiglu_inter, float* y) {
  __shared__ float xs[3][MG_TK][MG_TM];
  __shared__ float ws[3][MG_TK][MG_TN + 1];
  __shared__ float tile[MG_TM * MG_TN];  // SwiGLU: the block's outputs, gate and up columns side by side
  int e, row0, rows;
  if (!moe_row_tile(offsets, tile_start, n_experts, &e, &row0, &rows)) return;
  ExpertWeight w = table[e];
  int w_parts = (int)((w.flags >> 4) & 15), x_parts = (int)((w.flags >> 8) & 15);
  int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  float acc[4][4];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = 0.f;
  for (int k0 = 0; k0 < k; k0 += MG_TK) {
    for (int i = threadIdx.x; i < MG_TM * MG_TK; i += blockDim.x) {
      int r = i / MG_TK, c = i % MG_TK;
      float v = r < rows && k0 + c < k ? x[(long)(row0 + r) * k + k0 + c] : 0.f;
      bf16_parts(v, x_parts, &xs[0][c][r], MG_TK * MG_TM);
    }
    for (int i = threadIdx.x; i < MG_TN * MG_TK; i += blockDim.x) {
      int j = i / MG_TK, c = i % MG_TK;
      long wr;
      bool valid = moe_weight_row(j, n, swiglu_inter, &wr);
      float v = valid && k0 + c < k ? expert_weight(w, meta, k, wr, k0 + c) : 0.f;
      bf16_parts(v, x_parts == 0 ? 0 : w_parts, &ws[0][c][j], MG_TK * (MG_TN + 1));
    }
    __syncthreads();
    for (int c = 0; c < MG_TK; c++) {
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
          int r = ty * 4 + i, col = tx * 4 + j;
          if (x_parts == 0) {
            acc[i][j] = fmaf(xs[0][c][r], ws[0][c][col], acc[i][j]);
          } else {
            for (int a = 0; a < w_parts; a++)
              for (int p = 0; p < x_parts - a; p++) acc[i][j] = fmaf(xs[p][c][r], ws[a][c][col], acc[i][j]);
          }
        }
      }
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) tile[(ty * 4 + i) * MG_TN + tx * 4 + j] = acc[i][j];
  __syncthreads();
  moe_store(tile, row0, rows, n, swiglu_inter, y);
}

// moe_gemm on the tensor cores, for layers whose every expert multiplies BF16 parts (no fp32 plan): the same row tiles,
// column tiles and store; per MW_TK step of k the block writes the tile's x and weight parts as BF16 into shared memory
// (x row-major, the weight column-major: a weight row's k values side by side), and each of the 8 warps accumulates its
// two 16 x 16 output fragments (warp w: rows 16 * (w / 2), columns 32 * (w % 2)) with wmma BF16 16x16x16 products in
// fp32, one per (weight part a, input part p) with a + p < input parts. Twin: HostDevice.gemmExperts.
#define MW_TK 32
extern "C" __global__ void __launch_bounds__(256) moe_gemm_bf16(const float* x, const int* offsets, const int* tile_start,
                                                                int n_experts, const ExpertWeight* table,
                                                                const int* meta, int k, int n, int swiglu_inter,
                                                                float* y) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 xs[3][MG_TM * MW_TK];
  __shared__ __align__(32) __nv_bfloat16 ws[3][MG_TN * MW_TK];
  __shared__ __align__(32) float tile[MG_TM * MG_TN];
  int e, row0, rows;
  if (!moe_row_tile(offsets, tile_start, n_experts, &e, &row0, &rows)) return;
  ExpertWeight w = table[e];
  int w_parts = (int)((w.flags >> 4) & 15), x_parts = (int)((w.flags >> 8) & 15);
  int warp = threadIdx.x >> 5;
  int fr = warp >> 1, fc = (warp & 1) * 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
  wmma::fill_fragment(acc[0], 0.f);
  wmma::fill_fragment(acc[1], 0.f);
  for (int k0 = 0; k0 < k; k0 += MW_TK) {
    for (int i = threadIdx.x; i < MG_TM * MW_TK; i += blockDim.x) {
      int r = i / MW_TK, c = i % MW_TK;
      float v = r < rows && k0 + c < k ? x[(long)(row0 + r) * k + k0 + c] : 0.f;
      bf16_split(v, x_parts, &xs[0][i], MG_TM * MW_TK);
    }
    for (int i = threadIdx.x; i < MG_TN * MW_TK; i += blockDim.x) {
      int j = i / MW_TK, c = i % MW_TK;
      long wr;
      bool valid = moe_weight_row(j, n, swiglu_inter, &wr);
      float v = valid && k0 + c < k ? expert_weight(w, meta, k, wr, k0 + c) : 0.f;
      bf16_split(v, w_parts, &ws[0][i], MG_TN * MW_TK);
    }
    __syncthreads();
    for (int kk = 0; kk < MW_TK; kk += 16) {
      for (int a = 0; a < w_parts; a++) {
        for (int p = 0; p < x_parts - a; p++) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
          wmma::load_matrix_sync(fa, &xs[p][fr * 16 * MW_TK + kk], MW_TK);
          for (int f = 0; f < 2; f++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
            wmma::load_matrix_sync(fb, &ws[a][(fc + f) * 16 * MW_TK + kk], MW_TK);
            wmma::mma_sync(acc[f], fa, fb, acc[f]);
          }
        }
      }
    }
    __syncthreads();
  }
  for (int f = 0; f < 2; f++)
    wmma::store_matrix_sync(&tile[fr * 16 * MG_TN + (fc + f) * 16], acc[f], MG_TN, wmma::mem_row_major);
  __syncthreads();
  moe_store(tile, row0, rows, n, swiglu_inter, y);
}
