package dev.scorch.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.Linear;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.testing.DemoModels;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A K2.5-wrapped checkpoint is its text model: the same linears, the same scores, bit for bit. */
class K25WrapperTest {

    @Test
    void wrappedInt4ModelScoresAsItsTwin() {
        DeepseekV3Model plain = DeepseekV3Model.load(DemoModels.tinyInt4());
        DeepseekV3Model wrapped = DeepseekV3Model.load(DemoModels.tinyInt4K25());
        assertEquals(plain.config().weightPrefix(), "");
        assertEquals(wrapped.config().weightPrefix(), "language_model.");
        List<int[]> seqs = InvarianceTest.prompts(plain.vocabSize(), 21, 1, 9, 40, 75);
        try (CpuOps ops = new CpuOps(2)) {
            List<SequenceScore> a = InvarianceTest.score(plain, ops, seqs);
            List<SequenceScore> b = InvarianceTest.score(wrapped, ops, seqs);
            for (int i = 0; i < seqs.size(); i++) {
                InvarianceTest.assertSameBits(a.get(i), b.get(i), "sequence " + i);
            }
        }
    }

    @Test
    void routedExpertsLoadAsInt4GroupsTheRestAsStored() {
        ModelWeights w = ModelWeights.open(DemoModels.tinyInt4K25());
        Linear expert = w.linear("model.layers.1.mlp.experts.3.up_proj.weight");
        assertEquals(Linear.Format.INT4_GROUP, expert.format());
        assertEquals(32, expert.groupSize());
        assertEquals(96, expert.out());
        assertEquals(192, expert.in());
        assertEquals("language_model.model.layers.1.mlp.experts.3.up_proj.weight", expert.name());
        for (String plain : List.of(
                "model.layers.1.mlp.shared_experts.up_proj.weight",
                "model.layers.0.mlp.up_proj.weight",
                "model.layers.1.self_attn.o_proj.weight",
                "lm_head.weight",
                "model.layers.1.mlp.gate.weight")) {
            Linear l = w.linear(plain);
            assertEquals(Linear.Format.PLAIN, l.format(), plain);
            assertTrue(l.name().startsWith("language_model."), l.name());
        }
    }
}
