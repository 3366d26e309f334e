package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.generate.GenerateJob;
import dev.scorch.jobs.generate.GenerateSpec;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.jobs.score.ScoreJob;
import dev.scorch.jobs.score.ScoreSpec;
import dev.scorch.jobs.score.SparkTests;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import dev.scorch.udfs.score.ScoreOptions;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ScorchModel on a DataFrame read from a job's input equals the job's output on that input, column for column and
 * bit for bit (floats and doubles compared as their bits through JSON's shortest round-trip text): the score job on the
 * conformance checkpoint (with top-k) and on the demo model (text rows, continuations, bad rows), the generate job on
 * the demo model (seeded sampling, n samples, log-probs).
 */
class ApiParityTest {
    @TempDir
    static Path models;

    @TempDir
    Path tmp;

    static Path demo;
    static SparkSession spark;

    @BeforeAll
    static void setUp() throws IOException {
        spark = SparkTests.spark();
        demo = models.resolve("demo-tiny");
        new DemoModelWriter(DemoPreset.TINY, false, true, 0).write(demo);
    }

    static ScoreSpec scoreSpec(Path model, Path in, Path out, int topK) {
        return new ScoreSpec(
                model.toString(),
                in.toString(),
                null,
                out.toString(),
                "parquet",
                2,
                4096,
                256,
                1024L << 20,
                topK,
                LogitsMode.NONE,
                "id",
                "token_ids",
                "prompt",
                "continuation",
                "shared-path",
                1,
                1,
                WriteMode.NEW,
                BackendMode.AUTO,
                ScoreOptions.defaultGpuPrecision(),
                ScoreOptions.DEFAULT_GPU_BATCH_TOKENS,
                0,
                null);
    }

    /** Rows of a DataFrame as JSON, keyed by the given columns' values. */
    static Map<String, String> byKey(Dataset<Row> df, String... key) {
        Column[] k = new Column[key.length];
        for (int i = 0; i < key.length; i++) {
            k[i] = functions.col(key[i]).cast("string");
        }
        Map<String, String> out = new TreeMap<>();
        for (Row r : df.select(functions.concat_ws("/", k), functions.to_json(functions.struct(functions.col("*"))))
                .collectAsList()) {
            assertEquals(null, out.put(r.getString(0), r.getString(1)), "key " + r.getString(0) + " twice");
        }
        return out;
    }

    /** The job's output columns from the API's result: its id, its result columns, source_row left out. */
    static Dataset<Row> asJobColumns(Dataset<Row> api, List<String> results) {
        List<Column> cols = new ArrayList<>();
        cols.add(functions.col("id"));
        for (String c : results) {
            cols.add(functions.col(c).as(c.equals("scored_token_ids") ? "token_ids" : c));
        }
        return api.select(cols.toArray(new Column[0]));
    }

    static List<String> resultsOf(Dataset<Row> api, Dataset<Row> input) {
        List<String> all = List.of(api.columns());
        return all.subList(input.columns().length, all.size());
    }

    void assertScoreParity(Path model, Path input, int topK) throws IOException {
        Path out = tmp.resolve("job");
        ScoreJob.run(spark, scoreSpec(model, input, out, topK));
        Dataset<Row> job = spark.read().parquet(out.toString()).drop("source_row");

        Dataset<Row> in = spark.read().json(input.toString());
        try (ScorchModel m = ScorchModel.load(spark, model.toString())) {
            Dataset<Row> api = m.score(in, new ScoreParams().setTopK(topK).setThreads(1));
            Map<String, String> want = byKey(job, "id");
            Map<String, String> got = byKey(asJobColumns(api, resultsOf(api, in)), "id");
            assertEquals(want, got);
            assertTrue(want.size() >= 3, "rows compared: " + want.size());
        }
    }

    @Test
    void scoreEqualsTheScoreJobOnTheConformanceCheckpoint() throws IOException {
        assertScoreParity(SparkTests.conformanceModel(), SparkTests.goldenInput(tmp), 3);
    }

    @Test
    void scoreEqualsTheScoreJobOnTheDemoModel() throws IOException {
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in/rows.jsonl"),
                List.of(
                        "{\"id\":\"ids\",\"token_ids\":[1,2,3,4,5,6,7,8,9,10,11]}",
                        "{\"id\":\"text\",\"prompt\":\"Spark runs the model where the data is.\"}",
                        "{\"id\":\"qa\",\"prompt\":\"Q: 2+2? A:\",\"continuation\":\" 4\"}",
                        "{\"id\":\"vocab\",\"token_ids\":[1,700]}",
                        "{\"id\":\"empty\",\"token_ids\":[]}",
                        "{\"id\":\"blank\",\"prompt\":\"\"}",
                        "{\"id\":\"nocont\",\"prompt\":\"x\",\"continuation\":\"\"}"));
        assertScoreParity(demo, input, 0);
    }

    @Test
    void generateEqualsTheGenerateJobOnTheDemoModel() throws IOException {
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in/prompts.jsonl"),
                List.of(
                        "{\"id\":\"a\",\"prompt\":\"Once upon a time\"}",
                        "{\"id\":\"b\",\"token_ids\":[5,6,7,8]}",
                        "{\"id\":\"c\",\"prompt\":\"The weather\",\"max_new_tokens\":2,\"temperature\":0.0}",
                        "{\"id\":\"bad\",\"token_ids\":[1,9999]}"));
        Path out = tmp.resolve("job");
        GenerateSpec spec = new GenerateSpec(
                demo.toString(),
                input.toString(),
                null,
                out.toString(),
                "parquet",
                2,
                "id",
                "token_ids",
                "prompt",
                "messages",
                "shared-path",
                1,
                1,
                WriteMode.NEW,
                6,
                0.8,
                20,
                0.95,
                0,
                1,
                0,
                0,
                11L,
                List.of(),
                List.of(),
                false,
                2,
                true,
                2,
                256L << 20,
                4096,
                32,
                BackendMode.AUTO,
                GemmPrecision.BF16X3,
                null);
        GenerateJob.run(spark, spec);
        Dataset<Row> job = spark.read().parquet(out.toString()).drop("source_row");

        Dataset<Row> in = spark.read().json(input.toString());
        try (ScorchModel m = ScorchModel.load(spark, demo.toString())) {
            GenerateParams p = new GenerateParams()
                    .setRowOverrides(true)
                    .setMaxNewTokens(6)
                    .setTemperature(0.8)
                    .setTopK(20)
                    .setTopP(0.95)
                    .setSeed(11)
                    .setN(2)
                    .setLogprobs(true)
                    .setTopLogprobs(2)
                    .setMaxCacheBytes(256L << 20)
                    .setThreads(1);
            Dataset<Row> api = m.generate(in, p);
            Map<String, String> want = byKey(job, "id", "sample");
            Map<String, String> got = byKey(asJobColumns(api, resultsOf(api, in)), "id", "sample");
            assertEquals(want, got);
            assertEquals(8, want.size());
        }
    }
}
