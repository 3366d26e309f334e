package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.RopeScaling;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RopeTest {
    @TempDir
    Path dir;

    /** cos/sin of pos · inv_freq[i] × mscale, straight from the formula. */
    private static float[] expected(ModelConfig c, int pos) {
        int dim = c.qkRopeHeadDim();
        double[] invFreq = Rope.invFreq(dim, c.ropeTheta(), c.ropeScaling());
        RopeScaling s = c.ropeScaling();
        double mscale = Rope.yarnMscale(s.factor(), s.mscale()) / Rope.yarnMscale(s.factor(), s.mscaleAllDim());
        float[] out = new float[dim];
        for (int i = 0; i < dim / 2; i++) {
            out[2 * i] = (float) (Math.cos(pos * invFreq[i]) * mscale);
            out[2 * i + 1] = (float) (Math.sin(pos * invFreq[i]) * mscale);
        }
        return out;
    }

    private ModelConfig config() throws Exception {
        ModelConfig c = new DemoModelWriter(DemoPreset.TINY, false, true, 1).write(dir);
        assertNotNull(c.ropeScaling(), "the demo model uses YaRN, so mscale is not 1");
        return c;
    }

    @Test
    void tableHoldsEachPositionsValuesAcrossGrowth() throws Exception {
        ModelConfig c = config();
        Rope rope = new Rope(c);
        int dim = c.qkRopeHeadDim();
        float[] cs = new float[dim];
        // Short first (one growth), then past it (copies the old rows, computes the new ones), then far past it.
        for (int pos : new int[] {0, 1, 7, 1023, 1024, 1500, 2047, 2048, 5000, 70_000, 3}) {
            rope.cosSin(pos, cs);
            float[] want = expected(c, pos);
            assertArrayEquals(want, cs, "pos " + pos); // float arrays: equal bits
            float[] table = rope.table(pos + 1);
            assertTrue(table.length >= (pos + 1) * dim);
            assertArrayEquals(want, Arrays.copyOfRange(table, pos * dim, (pos + 1) * dim), "table pos " + pos);
        }
        assertSame(rope.table(10), rope.table(70_001), "a long enough table is not rebuilt");
    }

    @Test
    void rotateWithTableRowIsRotateWithCosSin() throws Exception {
        ModelConfig c = config();
        Rope rope = new Rope(c);
        int dim = c.qkRopeHeadDim();
        float[] cs = new float[dim];
        java.util.Random rnd = new java.util.Random(5);
        for (int pos : new int[] {0, 5, 900, 4000}) {
            float[] a = new float[dim + 3];
            for (int i = 0; i < a.length; i++) {
                a[i] = (float) rnd.nextGaussian();
            }
            float[] b = a.clone();
            rope.cosSin(pos, cs);
            rope.rotate(a, 3, cs);
            rope.rotate(b, 3, rope.table(pos + 1), pos * dim);
            assertArrayEquals(a, b, "pos " + pos);
        }
    }

    @Test
    void threadsGrowingTheTableTogetherSeeTheSameValues() throws Exception {
        ModelConfig c = config();
        Rope rope = new Rope(c);
        int dim = c.qkRopeHeadDim();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int seed = t;
                done.add(pool.submit(() -> {
                    float[] cs = new float[dim];
                    for (int pos = seed; pos < 20_000; pos += 97 + seed) {
                        rope.cosSin(pos, cs);
                        assertArrayEquals(expected(c, pos), cs, "pos " + pos);
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
