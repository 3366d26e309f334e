package dev.scorch.engine.device.cpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DecodeRows;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.LatentCache;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.model.KvCache;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.testing.TestModels;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The CPU device's GEMM: stacked weights, each row by its own rule, whole arrays; the kernels are tested apart. */
class CpuDeviceTest {
    private static float[] random(int n, long seed) {
        Random r = new Random(seed);
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) r.nextGaussian();
        }
        return v;
    }

    @Test
    void stackedWeightsGiveEachWeightsOwnMatmulSideBySide() {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        String p = "model.layers.0.self_attn.";
        Linear qA = w.linear(p + "q_a_proj.weight");
        Linear kvA = w.linear(p + "kv_a_proj_with_mqa.weight");
        int m = 19;
        int k = qA.in();
        int n = qA.out() + kvA.out();
        float[] x = random(m * k, 1);
        try (CpuOps ops = new CpuOps(2)) {
            CpuDevice dev = new CpuDevice(ops);
            Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
            dev.gemm(dev.upload(x), m, k, dev.weight(GemmPrecision.FP32, qA, kvA), n, y, GemmPrecision.FP32);
            float[] got = new float[m * n];
            dev.read(y, got, 0, got.length);
            float[] a = new float[m * qA.out()];
            float[] b = new float[m * kvA.out()];
            ops.matmul(x, m, qA, a);
            ops.matmul(x, m, kvA, b);
            for (int r = 0; r < m; r++) {
                assertArrayEquals(
                        Arrays.copyOfRange(a, r * qA.out(), (r + 1) * qA.out()),
                        Arrays.copyOfRange(got, r * n, r * n + qA.out()));
                assertArrayEquals(
                        Arrays.copyOfRange(b, r * kvA.out(), (r + 1) * kvA.out()),
                        Arrays.copyOfRange(got, r * n + qA.out(), (r + 1) * n));
            }
            assertThrows(
                    IllegalArgumentException.class,
                    () -> dev.gemm(dev.upload(x), m, k, dev.weight(GemmPrecision.FP32, qA), n, y, GemmPrecision.FP32));
        }
    }

    @Test
    void eachRowTakesItsSequencesPathWhateverItsBatchMates() {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        Linear o = w.linear("model.layers.0.self_attn.o_proj.weight");
        int k = o.in();
        int n = o.out();
        // Sequence 0 (3 tokens) extends a cache: decode rows; sequence 1 (4 tokens) is a prompt: prefill rows.
        PackedBatch batch = PackedBatch.of(List.of(new int[3], new int[4]));
        DecodeRows rows = DecodeRows.of(batch, new int[] {5, 0});
        float[] x = random(7 * k, 2);
        try (CpuOps ops = new CpuOps(2)) {
            CpuDevice dev = new CpuDevice(ops);
            float[] got = new float[7 * n];
            dev.matmul(x, 7, o, got, rows);
            float[] decode = new float[3 * n];
            ops.matmulDecode(Arrays.copyOf(x, 3 * k), 3, o, decode);
            float[] prefill = new float[4 * n];
            ops.matmul(Arrays.copyOfRange(x, 3 * k, 7 * k), 4, o, prefill);
            assertArrayEquals(decode, Arrays.copyOf(got, 3 * n));
            assertArrayEquals(prefill, Arrays.copyOfRange(got, 3 * n, 7 * n));
            // The kernels take whole arrays: a slice that does not start its array is refused, named.
            Buf xs = dev.alloc(Buf.Kind.F32, 8L * k);
            Buf ys = dev.alloc(Buf.Kind.F32, 7L * n);
            IllegalArgumentException e = assertThrows(
                    IllegalArgumentException.class,
                    () -> dev.gemm(
                            xs.slice(k, 7L * k),
                            7,
                            k,
                            dev.weight(GemmPrecision.FP32, o),
                            n,
                            ys,
                            GemmPrecision.FP32,
                            rows));
            assertTrue(
                    e.getMessage().startsWith("gemm x: the CPU kernels take a buffer from its start"), e.getMessage());
        }
        assertEquals(DecodeRows.ALL, DecodeRows.of(batch, new int[] {1, 2}));
        assertEquals(DecodeRows.NONE, DecodeRows.of(batch, new int[] {0, 0}));
        // A cache that extends as prefill makes its rows prefill rows, whatever the other sequence's are.
        KvCache plain = new KvCache(1, 4, 2, 8);
        KvCache chunked = new KvCache(1, 4, 2, 8).extendAsPrefill();
        DecodeRows mixed = DecodeRows.of(batch, new int[] {5, 5}, new LatentCache[] {chunked, plain});
        for (int i = 0; i < 7; i++) {
            assertEquals(i >= 3, mixed.decode(i), "row " + i);
        }
        assertEquals(DecodeRows.NONE, DecodeRows.of(batch, new int[] {5, 5}, new LatentCache[] {chunked, chunked}));
    }
}
