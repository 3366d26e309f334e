package dev.scorch.engine.device.host;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.diagnostics.KernelTwins;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * Each fused kernel of {@link HostDevice} equals, to the bit, the kernels it fuses run one after another: what lets the
 * model use them without changing its numbers (and what a GPU's kernels are compared with through {@link KernelTwins}).
 */
class FusedKernelsTest {
    final SplittableRandom rnd = new SplittableRandom(28);
    final HostDevice dev = new HostDevice();

    float[] random(int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        return v;
    }

    float[] read(Buf b, int n) {
        float[] v = new float[n];
        dev.read(b, v, 0, n);
        return v;
    }

    @Test
    void rmsNormRopeIsRmsNormThenCopyThenRope() {
        int rows = 9;
        int stride = 100;
        int rank = 64;
        int rope = 16;
        Buf x = dev.upload(random(rows * stride));
        Buf w = dev.upload(random(rank));
        Buf positions = dev.upload(new int[] {0, 3, 1, 7, 7, 2, 5, 6, 4});
        Buf cs = dev.upload(random(8 * rope));
        Buf latent = dev.alloc(Buf.Kind.F32, (long) rows * rank);
        Buf kPe = dev.alloc(Buf.Kind.F32, (long) rows * rope);
        int qOut = stride - rank - rope; // x [rows, stride] = [q_a | latent | k_pe]
        Rotary r = new Rotary(positions, cs);
        dev.rmsNormRope(x, rows, w, 1e-6f, new MlaShape(1, qOut, 0, rope, 0, rank, 1f), r, latent, kPe);
        Buf latent2 = dev.alloc(Buf.Kind.F32, (long) rows * rank);
        Buf kPe2 = dev.alloc(Buf.Kind.F32, (long) rows * rope);
        dev.rmsNorm(x, rows, stride, qOut, rank, w, 1e-6f, latent2);
        dev.copyCols(x, rows, stride, qOut + rank, rope, kPe2, rope, 0);
        dev.rope(kPe2, rows, 1, rope, 0, 0, rope, r);
        assertArrayEquals(read(latent2, rows * rank), read(latent, rows * rank));
        assertArrayEquals(read(kPe2, rows * rope), read(kPe, rows * rope));
    }

    @Test
    void gemmExpertsSwigluIsGemmExpertsThenSwiglu() {
        int k = 40;
        int inter = 24;
        int slots = 14;
        Buf offsets = dev.upload(new int[] {0, 5, 5, 14}); // expert 1 gets no rows
        Buf x = dev.upload(random(slots * k));
        for (GemmPrecision p : GemmPrecision.values()) {
            Buf[] w = {
                dev.weight(random(2 * inter * k), p),
                dev.weight(random(2 * inter * k), p),
                dev.weight(random(2 * inter * k), p)
            };
            Buf out = dev.alloc(Buf.Kind.F32, (long) slots * inter);
            dev.gemmExpertsSwiglu(x, offsets, slots, k, w, inter, out, p);
            Buf gu = dev.alloc(Buf.Kind.F32, (long) slots * 2 * inter);
            dev.gemmExperts(x, offsets, slots, k, w, 2 * inter, gu, p);
            Buf want = dev.alloc(Buf.Kind.F32, (long) slots * inter);
            dev.swiglu(gu, slots, inter, want);
            assertArrayEquals(read(want, slots * inter), read(out, slots * inter), p.toString());
        }
    }

    @Test
    void combineWithTheSharedExpertsIsCombineThenAdd() {
        int tokens = 6;
        int topK = 3;
        int width = 20;
        Buf ye = dev.upload(random(tokens * topK * width));
        int[] slot = new int[tokens * topK];
        for (int i = 0; i < slot.length; i++) {
            slot[i] = (i * 7) % slot.length;
        }
        Buf slots = dev.upload(slot);
        Buf weights = dev.upload(random(tokens * topK));
        Buf shared = dev.upload(random(tokens * width));
        Buf y = dev.alloc(Buf.Kind.F32, (long) tokens * width);
        dev.moeCombine(ye, slots, weights, tokens, topK, width, shared, y);
        Buf want = dev.alloc(Buf.Kind.F32, (long) tokens * width);
        dev.moeCombine(ye, slots, weights, tokens, topK, width, null, want);
        dev.add(want, shared, (long) tokens * width);
        assertArrayEquals(read(want, tokens * width), read(y, tokens * width));
    }

    @Test
    void thePermutationRejectsAnExpertOutOfRange() {
        Buf o = dev.alloc(Buf.Kind.I32, 5);
        Buf s = dev.alloc(Buf.Kind.I32, 4);
        Buf r = dev.alloc(Buf.Kind.I32, 4);
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> dev.moePermute(dev.upload(new int[] {0, 2, 1, 4}), 2, 2, 4, o, s, r));
        org.junit.jupiter.api.Assertions.assertEquals(
                "moePermute: expert 4 of pair 3 is not in [0, 4)", e.getMessage());
    }

    /** Slots by expert in ascending id, tokens in order within one; offsets the running counts. */
    @Test
    void thePermutationGroupsPairsByExpertThenToken() {
        // tokens 0..3, top 2: (1, 3), (0, 3), (1, 2), (0, 1)
        int[] experts = {1, 3, 0, 3, 1, 2, 0, 1};
        Buf o = dev.alloc(Buf.Kind.I32, 5);
        Buf s = dev.alloc(Buf.Kind.I32, 8);
        Buf r = dev.alloc(Buf.Kind.I32, 8);
        dev.moePermute(dev.upload(experts), 4, 2, 4, o, s, r);
        int[] offsets = new int[5];
        int[] slotOf = new int[8];
        int[] slotRow = new int[8];
        dev.read(o, offsets, 0, 5);
        dev.read(s, slotOf, 0, 8);
        dev.read(r, slotRow, 0, 8);
        assertArrayEquals(new int[] {0, 2, 5, 6, 8}, offsets);
        // expert 0: tokens 1, 3; expert 1: tokens 0, 2, 3; expert 2: token 2; expert 3: tokens 0, 1
        assertArrayEquals(new int[] {1, 3, 0, 2, 3, 2, 0, 1}, slotRow);
        assertArrayEquals(new int[] {2, 6, 0, 7, 3, 5, 1, 4}, slotOf);
    }
}
