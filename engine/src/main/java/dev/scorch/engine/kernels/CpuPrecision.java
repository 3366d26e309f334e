package dev.scorch.engine.kernels;

import java.util.Locale;

/**
 * How PackedGemm multiplies on the CPU. fp32: fused multiply-adds in fp32, the reference. The others run on the BF16
 * dot-product units (AVX512-BF16's VDPBF16PS) where {@link KernelSelection} finds them: each input is split once per GEMM
 * into {@link #parts} bf16 values, x = x1 + x2 + x3, each the bf16 rounding of what the ones before it left, and each
 * part times the weight (exact in bf16) is an exact product summed in fp32. Three parts carry all 24 bits of x: bf16x3 is
 * as accurate as fp32 (other rounding, the same size of error). bf16x2 carries 16 bits, bf16 8 (each product's relative
 * error at most 2^-16 and 2^-8: bf16's rounding of x, and of what it left). Decode steps (RowDotGemm) take the mode for
 * BF16 weights where the native row-dot runs on 16 lanes (their pairs are VDPBF16PS's operand as stored); FP8, INT4
 * and F32 weights, and the absorbed attention, stay fp32 there.
 */
public enum CpuPrecision {
    FP32(0),
    BF16X3(3),
    BF16X2(2),
    BF16(1);

    /** -Dscorch.cpu.precision=fp32|bf16x3|bf16x2|bf16 (bench, score and generate's --cpu-precision set it). */
    public static final String PROPERTY = "scorch.cpu.precision";

    private final int parts;

    CpuPrecision(int parts) {
        this.parts = parts;
    }

    /** bf16 parts of each input: 3, 2 or 1; 0 for fp32. */
    public int parts() {
        return parts;
    }

    /** The name users give: fp32, bf16x3, bf16x2, bf16. */
    public String id() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The mode named by id (any case). */
    public static CpuPrecision parse(String id) {
        for (CpuPrecision p : values()) {
            if (p.id().equalsIgnoreCase(id.trim())) {
                return p;
            }
        }
        throw new IllegalArgumentException("unknown CPU precision '" + id + "': expected fp32, bf16x3, bf16x2 or bf16");
    }

    /** A job's option: null for "default" (the executor's -D{@value #PROPERTY}, else fp32), else {@link #parse}. */
    public static CpuPrecision option(String id) {
        return "default".equalsIgnoreCase(id.trim()) ? null : parse(id);
    }
}
