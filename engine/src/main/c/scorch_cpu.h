/* What scorch_cpu.c shares with scorch_bf16.c. */
#ifndef SCORCH_CPU_H
#define SCORCH_CPU_H

/* x^T of one tile of mr rows (see scorch_cpu.c): xt[k * mr + r] = x[r * stride + k] for k < kDim, r < rows; 0 past rows. */
void scorch_transpose_tile(const float* x, int rows, int stride, int kDim, int mr, float* xt);

/* Decode's bf16-parts row-dot (scorch_bf16.c): x split into P parts of pairs, then BF16 weight rows by VDPBF16PS. */
#include <stdint.h>
void scorch_split_pairs(const float* x, int m, int kDim, int P, int32_t* xp);
void scorch_rowdot_bf16_pairs(const unsigned char* w, int kDim, int rows, const int32_t* xp, int P, int m, float* y,
                              int nDim);
#endif
