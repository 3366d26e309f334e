package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;

class RmsNormTest {
    private static float[] random(int n, long seed) {
        Random rnd = new Random(seed);
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (rnd.nextGaussian() * (1 + i % 7));
        }
        return a;
    }

    @Test
    void rowsOverThreadsGiveTheSerialBits() {
        int rows = 37;
        int stride = 300;
        int offset = 11;
        int dim = 256;
        float[] x = random(rows * stride, 1);
        float[] w = random(dim, 2);
        float[] serial = new float[rows * dim];
        RmsNorm.apply(x, rows, stride, offset, dim, w, 1e-6, serial);
        try (CpuOps ops = new CpuOps(2)) {
            float[] parallel = new float[rows * dim];
            new RmsNorm.Rows().apply(ops, x, rows, stride, offset, dim, w, 1e-6, parallel);
            assertArrayEquals(serial, parallel);
        }
    }

    @Test
    void rowsInPlaceGiveTheSerialBits() {
        int rows = 21;
        int dim = 160;
        float[] x = random(rows * dim, 6);
        float[] w = random(dim, 7);
        float[] serial = new float[rows * dim];
        RmsNorm.apply(x, rows, dim, 0, dim, w, 1e-6, serial);
        try (CpuOps ops = new CpuOps(2)) {
            new RmsNorm.Rows().apply(ops, x, rows, dim, 0, dim, w, 1e-6, x); // the final norm's call: out is x
            assertArrayEquals(serial, x);
        }
    }
}
