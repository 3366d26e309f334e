package dev.scorch.udfs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ScorchModel.score on the demo model in local[2]: every input column comes back untouched (nested, null, binary,
 * a dotted name) beside the results; text rows score their continuation only, with the same bits as the same tokens
 * given as ids; bad rows become error rows; the transform runs no Spark job until an action; result names may not
 * hide input columns.
 */
class ScorchModelTest {
    static final StructType DOC = new StructType()
            .add("title", DataTypes.StringType)
            .add("tags", new ArrayType(DataTypes.StringType, true))
            .add("meta", DataTypes.createMapType(DataTypes.StringType, DataTypes.IntegerType));
    static final StructType INPUT = new StructType()
            .add("key", DataTypes.IntegerType)
            .add("token_ids", new ArrayType(DataTypes.IntegerType, true))
            .add("doc", DOC)
            .add("note", DataTypes.StringType)
            .add("a.b", DataTypes.DoubleType)
            .add("blob", DataTypes.BinaryType);

    @TempDir
    static Path tmp;

    static SparkSession spark;
    static ScorchModel model;

    @BeforeAll
    static void load() {
        spark = ApiTests.spark();
        model = ScorchModel.load(spark, ApiTests.demoModel().toString());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static List<Row> inputRows() {
        Row doc = RowFactory.create("t", Arrays.asList("x", null), scala.collection.immutable.Map$.MODULE$.empty());
        return List.of(
                RowFactory.create(0, Arrays.asList(5, 17, 300, 2), doc, null, 1.5, new byte[] {1, 2}),
                RowFactory.create(1, Arrays.asList(5, 99999), null, "n", null, null),
                RowFactory.create(2, List.of(), RowFactory.create(null, null, null), null, -0.0, new byte[0]),
                RowFactory.create(3, null, doc, "no prompt at all", Double.NaN, null),
                RowFactory.create(4, Arrays.asList(9, null, 3), null, null, null, null));
    }

    @Test
    void keepsEveryInputColumnAndAddsTheScores() {
        Dataset<Row> df = spark.createDataFrame(inputRows(), INPUT).repartition(2);
        Dataset<Row> scored = model.score(df);

        List<String> names = Arrays.asList(scored.columns());
        assertEquals(
                List.of(
                        "key",
                        "token_ids",
                        "doc",
                        "note",
                        "a.b",
                        "blob",
                        "num_tokens",
                        "scored_token_ids",
                        "token_logprobs",
                        "sum_logprob",
                        "mean_logprob",
                        "perplexity",
                        "error",
                        "model"),
                names);
        for (int i = 0; i < INPUT.size(); i++) {
            assertEquals(INPUT.fields()[i], scored.schema().fields()[i], "input field " + i + " keeps its type");
        }
        // Collected through Spark on both sides (Row equality: byte arrays by content, NaN equal to NaN), and as JSON
        // (-0.0 kept apart from 0.0, binary as base64).
        org.apache.spark.sql.Column[] in = Arrays.stream(INPUT.fieldNames())
                .map(n -> df.col("`" + n + "`"))
                .toArray(org.apache.spark.sql.Column[]::new);
        org.apache.spark.sql.Column[] out = Arrays.stream(INPUT.fieldNames())
                .map(n -> scored.col("`" + n + "`"))
                .toArray(org.apache.spark.sql.Column[]::new);
        assertEquals(
                df.select(in).orderBy("key").collectAsList(),
                scored.select(out).orderBy("key").collectAsList());
        assertEquals(
                df.select(in).orderBy("key").toJSON().collectAsList(),
                scored.select(out).orderBy("key").toJSON().collectAsList());
        List<Row> rows = scored.orderBy("key").collectAsList();
        assertEquals(5, rows.size());
        for (Row r : rows) {
            assertEquals(model.label(), r.getAs("model"));
        }
        Row good = rows.get(0);
        assertNull(good.getAs("error"));
        assertEquals(4, (int) good.getAs("num_tokens"));
        assertEquals(List.of(5, 17, 300, 2), good.getList(good.fieldIndex("scored_token_ids")));
        List<Object> lps = good.getList(good.fieldIndex("token_logprobs"));
        assertNull(lps.get(0), "the first token has nothing before it");
        double sum = 0;
        for (int k = 1; k < 4; k++) {
            float lp = (Float) lps.get(k);
            assertTrue(lp < 0 && Float.isFinite(lp), "log-prob " + lp);
            sum += lp;
        }
        assertEquals(sum, (double) good.getAs("sum_logprob"), 1e-5, "the float log-probs add up to the sum in double");
        assertEquals(Math.exp(-(double) good.getAs("sum_logprob") / 3), (double) good.getAs("perplexity"), 1e-9);

        assertError(rows.get(1), "token id 99999 at position 1 is outside the vocabulary [0, 512)");
        assertError(rows.get(2), "token_ids is empty");
        assertError(rows.get(3), "token_ids is null");
        assertError(rows.get(4), "token id at position 1 is null");
    }

    static void assertError(Row r, String message) {
        assertEquals(message, r.getAs("error"), r.toString());
        for (String c : List.of("num_tokens", "scored_token_ids", "token_logprobs", "sum_logprob", "perplexity")) {
            assertNull(r.getAs(c), c + " of an error row");
        }
    }

    @Test
    void textRowsScoreTheirContinuationWithTheBitsOfTheSameIds() throws Exception {
        StructType schema = new StructType()
                .add("q", DataTypes.StringType)
                .add("a", DataTypes.StringType)
                .add("ids", new ArrayType(DataTypes.LongType, false));
        Tokenizer tok = Tokenizers.load(ApiTests.demoModel()).orElseThrow();
        int[] p = tok.encode("The capital of France is", true);
        int[] c = tok.encode(" Paris.", false);
        List<Long> all = new ArrayList<>();
        for (int t : p) {
            all.add((long) t);
        }
        for (int t : c) {
            all.add((long) t);
        }
        Dataset<Row> df = spark.createDataFrame(
                List.of(
                        RowFactory.create("The capital of France is", " Paris.", null),
                        RowFactory.create(null, null, all),
                        RowFactory.create("", null, null)),
                schema);
        List<Row> rows = model.score(
                        df,
                        new ScoreParams()
                                .setTextCol("q")
                                .setContinuationCol("a")
                                .setTokenIdsCol("ids"))
                .collectAsList();
        Row text = rows.get(0);
        Row ids = rows.get(1);
        assertNull(text.getAs("error"));
        assertEquals(
                ids.getList(ids.fieldIndex("scored_token_ids")), text.getList(text.fieldIndex("scored_token_ids")));
        List<Object> tl = text.getList(text.fieldIndex("token_logprobs"));
        List<Object> il = ids.getList(ids.fieldIndex("token_logprobs"));
        for (int k = 0; k < all.size(); k++) {
            if (k < p.length) {
                assertNull(tl.get(k), "prompt token " + k + " is context only");
            } else {
                assertEquals(
                        Float.floatToIntBits((Float) il.get(k)),
                        Float.floatToIntBits((Float) tl.get(k)),
                        "continuation token " + k);
            }
        }
        assertError(rows.get(2), "prompt is empty");
    }

    @Test
    void runsNoSparkJobUntilAnAction() {
        Path data = tmp.resolve("lazy.parquet");
        spark.range(0, 40)
                .selectExpr("id AS key", "array(id % 500, 7, id % 13 + 1) AS token_ids")
                .write()
                .parquet(data.toString());
        Dataset<Row> df = spark.read().parquet(data.toString()).repartition(3); // a shuffle: AQE plans it eagerly
        try (ApiTests.JobCounter jobs = new ApiTests.JobCounter()) {
            int before = jobs.count();
            Dataset<Row> scored = model.score(df, new ScoreParams().setOutputPrefix("s_"));
            Dataset<Row> filtered = scored.where("s_perplexity > 0").select("key", "s_perplexity");
            filtered.schema();
            assertEquals(before, jobs.count(), "no job before an action");
            assertEquals(40, filtered.count());
            assertTrue(jobs.count() > before, "the action runs the scoring");
        }
    }

    @Test
    void resultsMayNotHideInputColumns() {
        Dataset<Row> df = spark.sql("SELECT array(1L, 2L, 3L) AS token_ids, 'mine' AS Error");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> model.score(df));
        assertTrue(e.getMessage().contains("[Error]") && e.getMessage().contains("setOutputPrefix"), e.getMessage());

        Dataset<Row> twice = model.score(
                model.score(df, new ScoreParams().setOutputPrefix("m1_")), new ScoreParams().setOutputPrefix("m2_"));
        Row r = twice.collectAsList().get(0);
        assertEquals("mine", r.getAs("Error"));
        assertEquals((double) r.getAs("m1_sum_logprob"), (double) r.getAs("m2_sum_logprob"));
    }

    @Test
    void checksColumnsAndParametersOnTheDriver() {
        Dataset<Row> none = spark.sql("SELECT 1 AS x");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> model.score(none));
        assertTrue(e.getMessage().contains("[token_ids, prompt]"), e.getMessage());
        Dataset<Row> floats = spark.sql("SELECT array(1.5D) AS token_ids");
        e = assertThrows(IllegalArgumentException.class, () -> model.score(floats));
        assertTrue(e.getMessage().contains("array<double>"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ScoreParams.fromMap(Map.of("topk", 3)));
        assertTrue(e.getMessage().contains("'topk'") && e.getMessage().contains("top_k"), e.getMessage());
        assertEquals(3, ScoreParams.fromMap(Map.of("top_k", 3L)).topK());
        // cpu_precision: a mode, or "default" (the executor's), into the options the tasks get; a wrong name is refused
        assertEquals(
                dev.scorch.engine.kernels.CpuPrecision.BF16X3,
                ScoreParams.fromMap(Map.of("cpu_precision", "bf16x3"))
                        .options(spark)
                        .cpuPrecision());
        assertEquals(
                null,
                ScoreParams.fromMap(Map.of("cpu_precision", "default"))
                        .options(spark)
                        .cpuPrecision());
        assertEquals(
                dev.scorch.engine.kernels.CpuPrecision.FP32,
                GenerateParams.fromMap(Map.of("cpu_precision", "FP32")).cpuPrecision());
        assertThrows(IllegalArgumentException.class, () -> ScoreParams.fromMap(Map.of("cpu_precision", "fp16")));
        e = assertThrows(
                IllegalArgumentException.class, () -> ScorchModel.load(spark, "/x", Map.of("weight", "files")));
        assertTrue(e.getMessage().contains("'weight'"), e.getMessage());
    }
}
