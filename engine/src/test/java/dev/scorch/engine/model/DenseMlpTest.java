package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.runtime.Workspace;
import dev.scorch.engine.testing.DemoModels;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class DenseMlpTest {

    /**
     * A batch longer than {@link DenseMlp#chunkRows} runs in chunks of rows; every output row keeps the bits it has
     * when its chunk is run alone, and a workspace reused for a shorter batch afterwards changes nothing; an output
     * written over its input has the same bits.
     */
    @Test
    void rowChunksGiveEachRowTheBitsOfAShortBatch() {
        Path dir = DemoModels.tinyBf16();
        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        DenseMlp mlp = new DenseMlp(new ModelWeights(Checkpoint.open(dir), config), WeightLayout.layer(0) + "mlp.");
        int hidden = config.hiddenSize();
        int chunk = mlp.chunkRows();
        // The tiny model's intermediate (320) takes CHUNK_FLOATS / 320 rows a chunk: more than ROW_CHUNK.
        assertTrue(
                chunk > DenseMlp.ROW_CHUNK && chunk * config.intermediateSize() <= DenseMlp.CHUNK_FLOATS,
                chunk + " rows");
        int rows = chunk * 2 + 37;
        float[] x = new float[rows * hidden];
        SplittableRandom rnd = new SplittableRandom(3);
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        try (Ops ops = new CpuOps(2)) {
            DenseMlp.Scratch ws = new DenseMlp.Scratch(new Workspace());
            float[] all = new float[rows * hidden];
            mlp.forward(x, rows, Matmuls.prefill(ops), ws, all);
            // Short batches (no chunking) over windows that straddle the chunk borders.
            for (int from : new int[] {0, chunk - 5, 2 * chunk - 1}) {
                int n = Math.min(40, rows - from);
                float[] part = new float[n * hidden];
                mlp.forward(
                        Arrays.copyOfRange(x, from * hidden, (from + n) * hidden), n, Matmuls.prefill(ops), ws, part);
                assertArrayEquals(
                        Arrays.copyOfRange(all, from * hidden, (from + n) * hidden),
                        part,
                        "rows " + from + " .. " + (from + n));
            }
            // The output written over the input (the layers pass their normed input as out), chunked and not.
            for (int n : new int[] {rows, 40}) {
                float[] inPlace = Arrays.copyOf(x, n * hidden);
                mlp.forward(inPlace, n, Matmuls.prefill(ops), ws, inPlace);
                float[] apart = new float[n * hidden];
                mlp.forward(Arrays.copyOf(x, n * hidden), n, Matmuls.prefill(ops), ws, apart);
                assertArrayEquals(apart, inPlace, n + " rows in place");
            }
        }
    }
}
