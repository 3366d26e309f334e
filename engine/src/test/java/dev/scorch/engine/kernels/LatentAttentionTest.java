package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.testing.DemoModels;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Absorbed MLA attention of one row: the vector path against the plain loops, its bits reproducible, and heads decoded
 * from the checkpoint one at a time giving the bits of the whole fp32 copy.
 */
class LatentAttentionTest {
    @TempDir
    Path tmp;

    @Test
    void vectorMatchesScalarAndRepeatsItsBits() {
        // Odd sizes too: rank and rope not multiples of the vector width, v_head not of 4, lengths 1 .. 37.
        int[][] shapes = {{64, 32, 64, 256}, {16, 8, 12, 40}, {5, 3, 7, 19}};
        for (int[] sh : shapes) {
            int nope = sh[0];
            int rope = sh[1];
            int vHead = sh[2];
            int rank = sh[3];
            int heads = 3;
            float[] w = GemmTest.randn(heads * (nope + vHead) * rank, 1);
            for (int i = 0; i < w.length; i++) {
                w[i] *= 0.1f;
            }
            for (int len : new int[] {1, 2, 5, 8, 9, 37}) {
                float[] lat = GemmTest.randn(len * rank, 2 + len);
                float[] pe = GemmTest.randn(len * rope, 3 + len);
                float[] q = GemmTest.randn(2 * (nope + rope), 4 + len);
                for (int h = 0; h < heads; h++) {
                    LatentAttention.Head head =
                            new LatentAttention.Head(w, h * (nope + vHead), nope, rope, vHead, rank, 0.125f);
                    float[] scalar = new float[vHead + 1];
                    float[] vector = new float[vHead + 1];
                    float[] again = new float[vHead + 1];
                    int qOff = nope + rope; // the second query row
                    LatentAttention.attendScalar(head, q, qOff, lat, pe, len, scalar, 1, new LatentAttention.Scratch());
                    LatentAttention.attendVector(head, q, qOff, lat, pe, len, vector, 1, new LatentAttention.Scratch());
                    LatentAttention.Scratch used = new LatentAttention.Scratch();
                    LatentAttention.attendVector(head, q, 0, lat, pe, len, again, 1, used); // dirty the scratch first
                    LatentAttention.attendVector(head, q, qOff, lat, pe, len, again, 1, used);
                    String what = Arrays.toString(sh) + " len " + len + " head " + h;
                    assertArrayEquals(vector, again, what + ": vector path repeats its bits");
                    for (int e = 0; e <= vHead; e++) {
                        assertEquals(scalar[e], vector[e], 1e-5 + 1e-5 * Math.abs(scalar[e]), what + " at " + e);
                    }
                }
            }
        }
    }

    /**
     * Every head of a checkpoint's kv_b_proj, decoded by {@link LatentAttention#head} into a scratch, attends to the
     * same bits as over {@code kvBProj.toFloat()} (the fp32 copy the absorbed decode used to keep), on both paths: BF16
     * and FP8 (DeepSeek's and compressed-tensors' scales) from the demo models, and INT4 groups of K2-Thinking's layout.
     */
    @Test
    void headsDecodedOneAtATimeAttendAsTheWholeFp32Copy() throws IOException {
        for (Path dir : new Path[] {DemoModels.tinyBf16(), DemoModels.tinyFp8(), DemoModels.tinyFp8Ct()}) {
            ModelWeights w = ModelWeights.open(dir);
            ModelConfig c = w.config();
            for (int layer = 0; layer < c.numHiddenLayers(); layer++) {
                Linear kvB = w.linear("model.layers." + layer + ".self_attn.kv_b_proj.weight");
                String what = dir.getFileName() + " layer " + layer;
                assertAttendsAsCopy(
                        what, kvB, c.numAttentionHeads(), c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim());
            }
            assertTrue(
                    w.linear("model.layers.0.self_attn.kv_b_proj.weight").dtype()
                            == (dir == DemoModels.tinyBf16() ? DType.BF16 : DType.F8_E4M3),
                    dir.getFileName() + ": the format under test");
        }
        // INT4: 4 heads of (16 + 16) rows over rank 40 in groups of 32 (a partial last group, a word-aligned rank).
        Linear int4 = Int4Weights.random(tmp, 4 * 32, 40, 32, 7);
        assertAttendsAsCopy("int4", int4, 4, 16, 8, 16);
    }

    private static void assertAttendsAsCopy(String what, Linear kvB, int heads, int nope, int rope, int vHead) {
        int rank = kvB.in();
        float[] copy = kvB.toFloat();
        LatentAttention.Scratch scalarHeads = new LatentAttention.Scratch();
        LatentAttention.Scratch vectorHeads = new LatentAttention.Scratch();
        int len = 23;
        float[] lat = GemmTest.randn(len * rank, 11);
        float[] pe = GemmTest.randn(len * rope, 12);
        float[] q = GemmTest.randn(nope + rope, 13);
        for (int h = 0; h < heads; h++) {
            LatentAttention.Head old =
                    new LatentAttention.Head(copy, h * (nope + vHead), nope, rope, vHead, rank, 0.1f);
            LatentAttention.Head scalarHead = LatentAttention.head(kvB, h, nope, rope, vHead, 0.1f, false, scalarHeads);
            LatentAttention.Head vectorHead = LatentAttention.head(kvB, h, nope, rope, vHead, 0.1f, true, vectorHeads);
            int rows = (nope + vHead) * rank;
            float[] headCopy = Arrays.copyOfRange(copy, h * rows, (h + 1) * rows);
            assertArrayEquals(headCopy, Arrays.copyOf(scalarHead.w(), rows), what + " head " + h + ": scalar decode");
            assertArrayEquals(headCopy, Arrays.copyOf(vectorHead.w(), rows), what + " head " + h + ": vector decode");
            float[] want = new float[vHead];
            float[] got = new float[vHead];
            LatentAttention.attendScalar(old, q, 0, lat, pe, len, want, 0, new LatentAttention.Scratch());
            LatentAttention.attendScalar(scalarHead, q, 0, lat, pe, len, got, 0, new LatentAttention.Scratch());
            assertArrayEquals(want, got, what + " head " + h + ": scalar attention");
            LatentAttention.attendVector(old, q, 0, lat, pe, len, want, 0, new LatentAttention.Scratch());
            LatentAttention.attendVector(vectorHead, q, 0, lat, pe, len, got, 0, new LatentAttention.Scratch());
            assertArrayEquals(want, got, what + " head " + h + ": vector attention");
        }
    }

    /**
     * Decoding every head of a Kimi-K2-shaped kv_b_proj (64 heads of 256 rows; rank 128 here, not 512, to stay
     * small), in BF16 and INT4, keeps one head's fp32 rows in the scratch and, once warm, allocates nothing (the old
     * path made and kept the whole weight in fp32); asking again for the head it holds decodes nothing.
     */
    @Test
    void aScratchHoldsOneHeadAndNeverTheWholeWeight() throws IOException {
        assumeTrue(
                ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean mx
                        && mx.isThreadAllocatedMemoryEnabled(),
                "this JVM does not count allocations");
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        int heads = 64;
        int nope = 128;
        int vHead = 128;
        int rank = 128;
        int out = heads * (nope + vHead);
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.addFloats("kv_b_proj.weight", DType.BF16, new long[] {out, rank}, GemmTest.randn(out * rank, 9));
        sw.write(tmp.resolve("bf16.safetensors"));
        Linear bf16 =
                new Linear(SafetensorsFile.open(tmp.resolve("bf16.safetensors")).tensor("kv_b_proj.weight"));
        Linear int4 = Int4Weights.random(tmp, out, rank, 32, 8);
        long wholeCopyBytes = 4L * out * rank; // 8 MiB
        long headBytes = 4L * (nope + vHead) * rank; // 128 KiB
        for (Linear kvB : new Linear[] {bf16, int4}) {
            for (boolean simd : new boolean[] {false, true}) {
                String what = kvB.format() + (simd ? " vector" : " scalar");
                LatentAttention.Scratch s = new LatentAttention.Scratch();
                // Passes over every head until one allocates under 1 KiB (the decoders allocate until the JIT compiles
                // them: vectors, INT4's per-word reads); the least a pass allocated is checked.
                long allocated = Long.MAX_VALUE;
                int passes = 0;
                while (passes < 40 && allocated >= 1024) {
                    long start = mx.getCurrentThreadAllocatedBytes();
                    for (int h = 0; h < heads; h++) {
                        LatentAttention.head(kvB, h, nope, 64, vHead, 0.1f, simd, s);
                    }
                    allocated = Math.min(allocated, mx.getCurrentThreadAllocatedBytes() - start);
                    passes++;
                }
                System.out.printf("%s: 64 heads decoded, %d bytes allocated (pass %d)%n", what, allocated, passes);
                assertEquals((nope + vHead) * rank, s.headWeightFloats(), what + ": the scratch holds one head");
                // The old path allocated wholeCopyBytes once per layer and kept it; now a pass allocates nothing (the
                // Head record is kept too). INT4's scalar path decodes through Linear.row, the reference decoder, whose
                // per-word reads allocate short-lived buffers unless the JIT removes them: garbage, not a copy kept,
                // so only what the scratch holds is checked there.
                if (!(kvB == int4 && !simd)) {
                    assertTrue(
                            allocated < 1024,
                            what + ": decoding every head allocated " + allocated + " bytes (whole fp32 copy "
                                    + wholeCopyBytes + ", one head " + headBytes + ")");
                }
                LatentAttention.Head held = LatentAttention.head(kvB, heads - 1, nope, 64, vHead, 0.1f, simd, s);
                assertSame(held, LatentAttention.head(kvB, heads - 1, nope, 64, vHead, 0.1f, simd, s), what);
            }
        }
    }
}
