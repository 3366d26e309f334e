package dev.scorch.udfs.ml;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.udfs.api.ApiTests;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.ml.Pipeline;
import org.apache.spark.ml.PipelineModel;
import org.apache.spark.ml.PipelineStage;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ScorchScorer and ScorchGenerator in a Spark ML Pipeline: the saved pipeline holds parameters and the checkpoint's
 * path, no weights; loaded back it gives the same rows; transformSchema says the schema transform gives.
 */
class ScorchPipelineTest {
    @TempDir
    Path tmp;

    @Test
    void pipelineSavesLoadsAndGivesTheSameRows() throws IOException {
        SparkSession spark = ApiTests.spark();
        String model = ApiTests.demoModel().toString();
        Dataset<Row> df =
                spark.sql("SELECT * FROM VALUES (1, 'The cat sat'), (2, 'on the mat'), (3, '') AS t(key, text)");
        ScorchScorer scorer = new ScorchScorer()
                .setModelPath(model)
                .setTextCol("text")
                .setOutputPrefix("s_")
                .setTopK(2);
        ScorchGenerator generator = new ScorchGenerator()
                .setModelPath(model)
                .setTextCol("text")
                .setOutputPrefix("g_")
                .setN(2)
                .setTemperature(0.7)
                .setSeed(9)
                .setMaxNewTokens(3)
                .setStop("zz");
        PipelineModel fitted = new Pipeline()
                .setStages(new PipelineStage[] {scorer, generator})
                .fit(df);
        Dataset<Row> before = fitted.transform(df);
        assertEquals(fitted.transformSchema(df.schema()), before.schema());
        List<String> want = before.orderBy("key", "g_sample").toJSON().collectAsList();
        assertEquals(6, want.size());
        assertTrue(want.get(0).contains("\"s_perplexity\""), want.get(0));

        Path saved = tmp.resolve("pipeline");
        fitted.write().overwrite().save(saved.toString());
        try (Stream<Path> files = Files.walk(saved)) {
            List<Path> all = files.filter(Files::isRegularFile).toList();
            assertFalse(all.stream().anyMatch(p -> p.toString().endsWith(".safetensors")), all.toString());
            long bytes = all.stream().mapToLong(p -> p.toFile().length()).sum();
            assertTrue(bytes < 100_000, "parameters only: " + bytes + " bytes");
        }

        PipelineModel loaded = PipelineModel.load(saved.toString());
        ScorchScorer s = (ScorchScorer) loaded.stages()[0];
        assertEquals(model, s.getOrDefault(s.modelPath()));
        assertEquals(2, (int) (Integer) s.getOrDefault(s.topK()));
        ScorchGenerator g = (ScorchGenerator) loaded.stages()[1];
        assertFalse(g.isDefined(g.topP()), "unset sampling values stay unset: the checkpoint's");
        assertEquals(List.of("zz"), List.of((String[]) g.getOrDefault(g.stop())));
        assertEquals(
                want, loaded.transform(df).orderBy("key", "g_sample").toJSON().collectAsList());
    }
}
