package dev.scorch.engine.diagnostics;

import dev.scorch.engine.demo.Int4Groups;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.host.HostDevice;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * On one device: a GEMM with an INT4 weight kept packed against the same weight dequantised on the host (q · scale,
 * element by element) and uploaded as a plain weight, in each precision, and both against an fp64 product of the
 * dequantised weight. The tests run it on {@link HostDevice}; the device check on the GPU.
 */
public final class Int4Equivalence {
    private Int4Equivalence() {}

    /** Shape of the check: m rows of x, a weight [n, k] (k not a multiple of the group, 32, nor of 8). */
    static final int M = 24;

    static final int N = 96;
    static final int K = 1000 + 4;

    /**
     * Max absolute differences, by name: "P packed vs dequantised fp32" and "P packed vs dequantised P" (the same weight
     * uploaded as fp32 values in precision P: equal numbers expected in FP32 and BF16), "P packed vs fp64" and
     * "dequantised fp32 vs fp64" (the exact product: the measured error of each mode), and "max |y|" for scale.
     */
    public static Map<String, Double> measure(Device dev) {
        float[][] xw = PackedEquivalence.operands(new SplittableRandom(25), M, N, K);
        Int4Groups q = Int4Groups.quantize(xw[1], N, K, 32);
        Map<String, Double> out = new LinkedHashMap<>();
        Buf xb = dev.upload(xw[0]);
        Buf packed = dev.int4Weight(q.packed(), q.scales(), N, K, 32);
        double maxY = PackedEquivalence.measure(dev, xw[0], xb, M, K, packed, q.dequantize(), N, "", out);
        out.put("max |y|", maxY);
        dev.free(packed);
        dev.free(xb);
        return out;
    }
}
