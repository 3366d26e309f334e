package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.testing.DemoModels;
import java.util.function.ToLongFunction;
import org.junit.jupiter.api.Test;

/** The decode benchmark's own bookkeeping: the experts a step reads, counted per layer, and the bytes of each tensor. */
class DecodeBenchmarkTest {
    /**
     * Bytes a pass reads, as each checkpoint stores the tensor: a routed expert of the INT4 demo is its packed words (4 bits
     * an input) and its BF16 group scales (one per 32 inputs), against 2 bytes an input in BF16 and 1 (plus F32 scales per
     * 128 x 128 block) in FP8; everything else is the same BF16 tensor in the INT4 checkpoint.
     */
    @Test
    void checkpointBytesAreTheStoredTensors() {
        ToLongFunction<WeightLayout.Spec> int4 =
                DecodeBenchmark.checkpointBytes(ModelWeights.open(DemoModels.tinyInt4()));
        ToLongFunction<WeightLayout.Spec> bf16 =
                DecodeBenchmark.checkpointBytes(ModelWeights.open(DemoModels.tinyBf16()));
        ToLongFunction<WeightLayout.Spec> fp8 =
                DecodeBenchmark.checkpointBytes(ModelWeights.open(DemoModels.tinyFp8()));
        ModelConfig c = ModelConfig.read(DemoModels.tinyInt4().resolve("config.json"));
        int experts = 0;
        for (WeightLayout.Spec spec : WeightLayout.of(c)) {
            long out = spec.shape()[0];
            long in = spec.shape().length > 1 ? spec.shape()[1] : 1;
            if (spec.routedExpert()) {
                experts++;
                assertEquals(
                        out * ((in + 7) / 8) * 4 + out * ((in + 31) / 32) * 2, int4.applyAsLong(spec), spec.name());
                assertEquals(out * in * 2, bf16.applyAsLong(spec), spec.name());
                assertEquals(
                        out * in + ((out + 127) / 128) * ((in + 127) / 128) * 4, fp8.applyAsLong(spec), spec.name());
            } else {
                assertEquals(bf16.applyAsLong(spec), int4.applyAsLong(spec), spec.name());
            }
        }
        assertEquals(true, experts > 0, "the demo has routed experts");
    }

    @Test
    void distinctExpertsCountsEachLayersExpertsOnce() {
        boolean[] seen = new boolean[8];
        // Layer 0: experts 1, 2 (1 twice); layer 1: expert 3 (twice) and 1 again, which counts for this layer too.
        int[][] routes = {{1, 2, 1, 2}, {3, 3, 1, 3}};
        assertEquals(4, DecodeBenchmark.distinctExperts(routes, seen));
        // The buffer is reused: the next step starts from nothing seen.
        assertEquals(1, DecodeBenchmark.distinctExperts(new int[][] {{7, 7}}, seen));
    }
}
