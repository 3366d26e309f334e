package dev.scorch.engine.kernels;

import java.lang.reflect.Field;

/**
 * A child JVM for {@link KernelSelectionTest}: prints this JVM's selection and the switches the kernels read from it,
 * one key=value a line.
 */
public final class KernelSelectionProbe {
    private KernelSelectionProbe() {}

    public static void main(String[] args) throws ReflectiveOperationException {
        KernelSelection k = KernelSelection.current();
        System.out.println("prefill=" + k.prefillGemm());
        System.out.println("attention=" + k.attention());
        System.out.println("vectorMath=" + k.vectorMath());
        System.out.println("gemm.native=" + PackedGemm.NATIVE);
        System.out.println("gemm.nr=" + PackedGemm.NR);
        System.out.println("gemm.precision=" + PackedGemm.PRECISION.id());
        try (CpuOps ops = new CpuOps(1)) {
            System.out.println("cpuops.precision=" + ops.precision().id());
        }
        System.out.println("attention.native=" + NativeAttention.AVAILABLE);
        System.out.println("vecmath.native=" + NativeVecMath.AVAILABLE);
        System.out.println("native.status=" + NativeCpu.status());
        Field batched =
                Class.forName("dev.scorch.engine.device.cuda.CudaDevice").getDeclaredField("BATCHED_EXPERTS");
        batched.setAccessible(true);
        System.out.println("cuda.batched=" + batched.getBoolean(null));
        System.out.println("simd=" + k.simd());
    }
}
