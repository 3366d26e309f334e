package dev.scorch.jobs.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.generate.GenerateJobTest.Generated;
import dev.scorch.jobs.generate.GenerateJobTest.Spec;
import dev.scorch.jobs.score.ScoreJobNonFiniteTest;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Generation on a checkpoint whose weights hold NaN: a prompt the NaN reaches samples from NaN logits, which must give
 * an error row ("error" finish, no completion), not a garbage completion reported as success. The NaN is one row of
 * embed_tokens ({@link ScoreJobNonFiniteTest#POISON}): only prompts holding that token see it.
 */
class GenerateJobNonFiniteTest {
    @TempDir
    Path tmp;

    @Test
    void aPromptTheNanReachesGetsAnErrorRowPerSample() throws IOException {
        Path model = tmp.resolve("nan-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 9902).write(model);
        ScoreJobNonFiniteTest.nanEmbeddingRow(model, ScoreJobNonFiniteTest.POISON);
        int p = ScoreJobNonFiniteTest.POISON;
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"bad\",\"token_ids\":[5," + p + ",17,40]}",
                        "{\"id\":\"good\",\"token_ids\":[5,18,17,40]}"));
        Spec spec = new Spec(model, input, tmp.resolve("out"));
        spec.maxNewTokens = 6;
        spec.n = 2;
        spec.temperature = 0.8;
        spec.logprobs = true;
        spec.run();
        Map<String, Generated> rows = GenerateJobTest.read(tmp.resolve("out"), "parquet");
        assertEquals(4, rows.size(), rows.keySet().toString());
        for (int s = 0; s < 2; s++) {
            Generated bad = rows.get("bad#" + s);
            assertEquals(
                    "non-finite logits at generated token 0: the checkpoint's weights or config produce NaN/Inf",
                    bad.error());
            assertEquals("error", bad.finishReason());
            assertNull(bad.completion());
            assertNull(bad.tokenIds());
            assertNull(bad.logprobs());
            Generated good = rows.get("good#" + s);
            assertNull(good.error(), "good#" + s);
            assertEquals("length", good.finishReason());
            assertNotNull(good.logprobs());
            for (float lp : good.logprobs()) {
                assertTrue(Float.isFinite(lp) && lp <= 0, "log-prob " + lp);
            }
        }
    }
}
