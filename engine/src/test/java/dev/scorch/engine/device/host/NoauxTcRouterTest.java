package dev.scorch.engine.device.host;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.MoeShape;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The one noaux_tc router: by hand on small cases, and HostDevice's moeRoute is it, bit for bit. */
class NoauxTcRouterTest {
    private static float sigmoid(double x) {
        return (float) (1.0 / (1.0 + Math.exp(-x)));
    }

    @Test
    void groupsAreKeptByTheirTopTwoSumAndTheBestExpertsOfThemChosen() {
        // 8 experts in 4 groups of 2; keep 2 groups, choose 2 experts. Expert 0 alone is the best, but its group's
        // second is poor: groups 1 (experts 2, 3) and 3 (6, 7) have the larger top-2 sums.
        MoeShape r = MoeShape.router(8, 2, 4, 2, true, 2.5f);
        float[] logits = {4f, -6f, 1f, 1.5f, -1f, -1f, 2f, 0.5f};
        float[] bias = {0f, 0f, 0f, 0f, 0f, 0f, 0f, -0.1f};
        int[] experts = new int[2];
        float[] weights = new float[2];
        NoauxTcRouter.route(logits, 0, bias, 0, 1, r, experts, 0, weights, 0, new NoauxTcRouter.Scratch());
        // Choices: 2: s(1) = .731, 3: s(1.5) = .818, 6: s(2) = .881, 7: s(.5) - .1 = .522; group sums 1.549 and 1.403
        // against group 0's .982 + .002. Best two of groups 1 and 3: experts 3 and 6.
        assertArrayEquals(new int[] {3, 6}, experts);
        float s3 = sigmoid(1.5);
        float s6 = sigmoid(2);
        float sum = s3 + s6;
        assertEquals(s3 / (sum + 1e-20f) * 2.5f, weights[0]);
        assertEquals(s6 / (sum + 1e-20f) * 2.5f, weights[1]);
    }

    @Test
    void tiesGoToTheLowerIndexAndWeightsAreUnbiasedScores() {
        // One group; equal choices everywhere: experts 0 and 1. The bias lifts expert 3's choice but not its weight.
        MoeShape r = MoeShape.router(4, 2, 1, 1, false, 1f);
        int[] experts = new int[2];
        float[] weights = new float[2];
        NoauxTcRouter.route(
                new float[] {0, 0, 0, 0},
                0,
                new float[4],
                0,
                1,
                r,
                experts,
                0,
                weights,
                0,
                new NoauxTcRouter.Scratch());
        assertArrayEquals(new int[] {0, 1}, experts);
        NoauxTcRouter.route(
                new float[] {0, 0, 0, -3},
                0,
                new float[] {0, 0, 0, 1},
                0,
                1,
                r,
                experts,
                0,
                weights,
                0,
                new NoauxTcRouter.Scratch());
        assertArrayEquals(new int[] {0, 3}, experts);
        assertArrayEquals(new float[] {0.5f, sigmoid(-3)}, weights);
    }

    @Test
    void hostDeviceRoutesAsTheCpuModel() {
        // Kimi K2's shape (384 experts, 8 groups, keep 4, top 8), random logits and biases, one scratch over all
        // tokens.
        MoeShape r = MoeShape.router(384, 8, 8, 4, true, 2.827f);
        int t = 64;
        Random rnd = new Random(11);
        float[] logits = new float[t * 384];
        float[] bias = new float[384];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = (float) rnd.nextGaussian() * 3;
        }
        for (int i = 0; i < bias.length; i++) {
            bias[i] = (float) rnd.nextGaussian() * 0.1f;
        }
        int[] experts = new int[t * 8];
        float[] weights = new float[t * 8];
        NoauxTcRouter.route(logits, 0, bias, 0, t, r, experts, 0, weights, 0, new NoauxTcRouter.Scratch());

        HostDevice dev = new HostDevice();
        Buf e = dev.alloc(Buf.Kind.I32, t * 8);
        Buf w = dev.alloc(Buf.Kind.F32, t * 8);
        dev.moeRoute(dev.upload(logits), dev.upload(bias), t, r, e, w);
        int[] gotExperts = new int[t * 8];
        float[] gotWeights = new float[t * 8];
        dev.read(e, gotExperts, 0, t * 8);
        dev.read(w, gotWeights, 0, t * 8);
        assertArrayEquals(experts, gotExperts);
        assertArrayEquals(weights, gotWeights);
    }
}
