package dev.scorch.engine.diagnostics;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.PackedFp8;
import dev.scorch.engine.device.host.HostDevice;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * On one device: a GEMM with an FP8 block weight kept as its codes against the same weight dequantised on the host
 * (e4m3 code · block scale, element by element) and uploaded as a plain weight, in each precision, and both against an
 * fp64 product of the dequantised weight; with DeepSeek's fp32 scales (three BF16 parts a weight) and with BF16 scales
 * (two). The tests run it on {@link HostDevice}; the device check on the GPU.
 */
public final class Fp8Equivalence {
    private Fp8Equivalence() {}

    /** Shape of the check: m rows of x, a weight [n, k] in 128 x 128 blocks, both partial at the end (200 = 128 + 72). */
    static final int M = 24;

    static final int N = 200;
    static final int K = 1000 + 4;
    static final int BLOCK = 128;

    /**
     * Max absolute differences, by name, for S in "fp32 scales" and "bf16 scales": "S P packed vs dequantised fp32" and
     * "S P packed vs dequantised P" (the same weight uploaded as fp32 values in precision P: equal numbers expected in
     * FP32 and BF16), "S P packed vs fp64" and "S dequantised fp32 vs fp64" (the exact product: the measured error of
     * each mode), and "max |y|" for scale.
     */
    public static Map<String, Double> measure(Device dev) {
        float[][] xw = PackedEquivalence.operands(new SplittableRandom(28), M, N, K);
        Fp8Blocks q = Fp8Blocks.quantize(xw[1], N, K, BLOCK, BLOCK);
        float[] bf16Scales = q.scaleInv().clone();
        for (int i = 0; i < bf16Scales.length; i++) {
            bf16Scales[i] = NumberFormats.roundToBf16(bf16Scales[i]);
        }
        Map<String, Double> out = new LinkedHashMap<>();
        Buf xb = dev.upload(xw[0]);
        double maxY = 0;
        for (String s : new String[] {"fp32 scales", "bf16 scales"}) {
            float[] scales = s.startsWith("fp32") ? q.scaleInv() : bf16Scales;
            float[] deq = new float[N * K];
            for (int r = 0; r < N; r++) {
                for (int c = 0; c < K; c++) {
                    deq[r * K + c] = NumberFormats.e4m3ToFloat(q.codes()[r * K + c])
                            * scales[(r / BLOCK) * q.scaleCols() + c / BLOCK];
                }
            }
            Buf packed = PackedFp8.upload(dev, q.codes(), scales, N, K, BLOCK, BLOCK);
            maxY = Math.max(maxY, PackedEquivalence.measure(dev, xw[0], xb, M, K, packed, deq, N, s + " ", out));
            dev.free(packed);
        }
        out.put("max |y|", maxY);
        dev.free(xb);
        return out;
    }
}
