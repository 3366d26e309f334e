/* What scorch_cpu.c shares with scorch_bf16.c. */
#ifndef SCORCH_CPU_H
#define SCORCH_CPU_H

/* x^T of one tile of mr rows (see scorch_cpu.c): xt[k * mr + r] = x[r * stride + k] for k < kDim, r < rows; 0 past rows. */
void scorch_transpose_tile(const float* x, int rows, int stride, int kDim, int mr, float* xt);
#endif
