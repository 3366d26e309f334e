package dev.scorch.engine.device.host;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.kernels.LatentAttention;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link HostDevice#mlaDecode}, the absorbed attention GPU decode runs, is the CPU's scalar absorbed attention
 * ({@link LatentAttention#attendScalar}) to the bit: the same sums in the same order, over the same cache rows
 * [c | k_pe].
 */
class MlaDecodeTest {
    @ParameterizedTest(name = "{0}+{1}/{2} rank {3}, {4} new after {5}, {6}")
    @CsvSource({
        "16, 8, 16, 32, 1, 9, FP32", // the tiny demo's head dims
        "64, 32, 64, 256, 3, 40, FP32", // the small demo's, three new tokens (causal among them)
        "64, 32, 64, 256, 1, 0, BF16X3", // a first token: the cache holds only itself
        "128, 64, 128, 512, 1, 70, BF16" // DeepSeek-V3's, kv_b_proj in BF16
    })
    void equalsTheCpuScalarAbsorbedAttentionBitwise(
            int nope, int rope, int v, int rank, int rows, int past, GemmPrecision precision) {
        int heads = 3;
        int qHead = nope + rope;
        int width = rank + rope;
        float scale = 0.0721f;
        SplittableRandom rnd = new SplittableRandom(rank + rows + past);
        float[] q = random(rnd, rows * heads * qHead);
        float[] cache = random(rnd, (past + rows) * width);
        float[] kvB = random(rnd, heads * (nope + v) * rank);
        HostDevice dev = new HostDevice();
        Buf w = dev.weight(kvB, precision);
        Buf out = dev.alloc(Buf.Kind.F32, (long) rows * heads * v);
        // The cache as a layer of a larger allocation (an offset), as GpuKvCache hands it over.
        Buf cacheBuf = dev.alloc(Buf.Kind.F32, (long) (past + rows + 2) * width);
        Buf layer = cacheBuf.slice(2L * width, (long) (past + rows) * width);
        dev.write(layer, cache, 0, cache.length);
        dev.mlaDecode(dev.upload(q), rows, layer, past, w, new MlaShape(heads, 0, nope, rope, v, rank, scale), out);
        float[] got = new float[rows * heads * v];
        dev.read(out, got, 0, got.length);

        // The CPU's form: kv_b_proj as the device holds it (BF16-rounded in BF16 modes).
        float[] wf = new float[kvB.length];
        for (int i = 0; i < wf.length; i++) {
            wf[i] = precision.bf16Weights() ? HostDevice.bf16(kvB[i]) : kvB[i];
        }
        float[] want = new float[got.length];
        LatentAttention.Scratch scratch = new LatentAttention.Scratch();
        for (int h = 0; h < heads; h++) {
            LatentAttention.Head head = new LatentAttention.Head(wf, h * (nope + v), nope, rope, v, rank, scale);
            for (int i = 0; i < rows; i++) {
                LatentAttention.attendScalar(
                        head,
                        q,
                        (i * heads + h) * qHead,
                        cache,
                        width,
                        past + i + 1,
                        want,
                        (i * heads + h) * v,
                        scratch);
            }
        }
        assertArrayEquals(want, got);
    }

    @Test
    void refusesPackedInt4KvBProj() {
        HostDevice dev = new HostDevice();
        Buf int4 = dev.int4Weight(new int[4 * 2], new float[4], 4, 16, 16);
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> dev.mlaDecode(
                        dev.alloc(Buf.Kind.F32, 4),
                        1,
                        dev.alloc(Buf.Kind.F32, 18),
                        0,
                        int4,
                        new MlaShape(1, 0, 2, 2, 2, 16, 1f),
                        dev.alloc(Buf.Kind.F32, 2)));
        assertEquals("mlaDecode takes kv_b_proj in F32 or BF16, not INT4", e.getMessage());
    }

    private static float[] random(SplittableRandom rnd, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        return v;
    }
}
