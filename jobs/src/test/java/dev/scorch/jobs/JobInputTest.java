package dev.scorch.jobs;

import static org.apache.spark.sql.functions.spark_partition_id;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Reading a job's input: RFC 4180 CSV, malformed records and bad token_ids as row errors, stable locators, balance by rows. */
class JobInputTest {
    @TempDir
    Path tmp;

    static JobSpec spec(Path input, String format) {
        return new dev.scorch.jobs.score.ScoreSpec(
                "unused",
                input.toString(),
                format,
                "unused",
                "parquet",
                2,
                4096,
                256,
                1 << 20,
                0,
                dev.scorch.engine.scoring.LogitsMode.NONE,
                "id",
                "token_ids",
                "prompt",
                "continuation",
                "shared-path",
                1,
                1,
                dev.scorch.jobs.output.WriteMode.NEW,
                dev.scorch.engine.backend.BackendMode.CPU,
                dev.scorch.udfs.score.ScoreOptions.defaultGpuPrecision(),
                dev.scorch.udfs.score.ScoreOptions.DEFAULT_GPU_BATCH_TOKENS,
                0,
                null);
    }

    static String str(Row r, String column) {
        return r.getAs(column);
    }

    static Map<String, Row> byId(Dataset<Row> rows) {
        Map<String, Row> m = new HashMap<>();
        for (Row r : rows.collectAsList()) {
            Object id = r.getAs("id");
            m.put(String.valueOf(id), r);
        }
        return m;
    }

    @Test
    void csvFieldsWithQuotedNewlinesStayOneRow() throws IOException {
        Path csv = tmp.resolve("in.csv");
        Files.writeString(
                csv, "id,prompt\n" + "a,\"first line\nsecond line\"\n" + "b,\"she said \"\"hi\"\"\"\n" + "c,plain\n");
        JobInput in = JobInput.read(SparkTests.spark(), spec(csv, null), raw -> List.of());
        Map<String, Row> rows = byId(in.rows);
        assertEquals(3, in.count());
        assertEquals(3, rows.size());
        assertEquals("first line\nsecond line", str(rows.get("a"), "prompt"));
        assertEquals("she said \"hi\"", str(rows.get("b"), "prompt"));
        assertEquals("in.csv:2", str(rows.get("c"), "_source"));
        for (Row r : rows.values()) {
            assertNull(r.getAs("_input_error"), String.valueOf(r));
        }
    }

    @Test
    void malformedRecordsAndTokenIdsThatAreNotIntegersBecomeRowErrors() throws IOException {
        Path jsonl = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"good\",\"token_ids\":[1,2,3]}",
                        "{\"id\":\"broken\",\"token_ids\":[1,2",
                        "{\"id\":\"float\",\"token_ids\":[1.5,2]}",
                        "{\"id\":\"string\",\"token_ids\":\"abc\"}",
                        "{\"id\":\"nested\",\"token_ids\":[[1,2],[3]]}",
                        "{\"id\":\"null\",\"token_ids\":null}"));
        JobInput in = JobInput.read(SparkTests.spark(), spec(jsonl, null), raw -> List.of());
        Map<String, Row> rows = byId(in.rows);
        assertEquals(6, in.count());
        assertNull(str(rows.get("good"), "_input_error"));
        assertEquals(
                List.of(1L, 2L, 3L), rows.get("good").getList(rows.get("good").fieldIndex("token_ids")));
        Row broken = in.rows.where("_source = 'in.jsonl:1'").first();
        assertTrue(
                String.valueOf(str(broken, "_input_error")).startsWith("malformed JSON record: {\"id\":\"broken\""),
                broken.toString());
        assertEquals("token_ids is not an array of integers: [1.5,2]", str(rows.get("float"), "_input_error"));
        assertEquals("token_ids is not an array of integers: abc", str(rows.get("string"), "_input_error"));
        assertEquals("token_ids is not an array of integers: [[1,2],[3]]", str(rows.get("nested"), "_input_error"));
        assertNull(str(rows.get("null"), "_input_error"), "a null token_ids is the partition function's to report");
    }

    @Test
    void malformedRecordsComeBackAsErrorRowsOfTheScoreJob() throws IOException {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 3).write(model);
        Path jsonl = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"good\",\"token_ids\":[1,2,3]}",
                        "{\"id\":\"broken\",\"token_ids\":[1,2",
                        "{\"id\":\"float\",\"token_ids\":[1.5,2]}"));
        Path out = tmp.resolve("out");
        dev.scorch.jobs.score.ScoreJob.run(
                SparkTests.spark(),
                new dev.scorch.jobs.score.ScoreSpec(
                        model.toString(),
                        jsonl.toString(),
                        null,
                        out.toString(),
                        "parquet",
                        2,
                        4096,
                        256,
                        64L << 20,
                        0,
                        dev.scorch.engine.scoring.LogitsMode.NONE,
                        "id",
                        "token_ids",
                        "prompt",
                        "continuation",
                        "shared-path",
                        1,
                        1,
                        dev.scorch.jobs.output.WriteMode.NEW,
                        dev.scorch.engine.backend.BackendMode.CPU,
                        dev.scorch.udfs.score.ScoreOptions.defaultGpuPrecision(),
                        dev.scorch.udfs.score.ScoreOptions.DEFAULT_GPU_BATCH_TOKENS,
                        0,
                        null));
        Map<String, String> errors = new HashMap<>();
        for (Row r : SparkTests.spark().read().parquet(out.toString()).collectAsList()) {
            errors.put(r.getAs("source_row"), r.getAs("error"));
        }
        assertEquals(3, errors.size());
        assertNull(errors.get("in.jsonl:0"));
        assertTrue(errors.get("in.jsonl:1").startsWith("malformed JSON record: "), errors.get("in.jsonl:1"));
        assertTrue(errors.get("in.jsonl:1").endsWith("(input row in.jsonl:1)"), errors.get("in.jsonl:1"));
        assertTrue(
                errors.get("in.jsonl:2").startsWith("token_ids is not an array of integers: [1.5,2]"),
                errors.get("in.jsonl:2"));
    }

    /** The locators and ids of a file read by Spark in splits of about splitBytes (the partition count added to partitionsOut). */
    Dataset<Row> readSplit(Path file, long splitBytes, List<Integer> partitionsOut) {
        SparkSession spark = SparkTests.spark();
        String key = "spark.sql.files.maxPartitionBytes";
        spark.conf().set(key, String.valueOf(splitBytes));
        spark.conf().set("spark.sql.files.openCostInBytes", "0");
        try {
            JobInput in = JobInput.read(spark, spec(file, "jsonl"), raw -> List.of());
            partitionsOut.add(in.rows.rdd().getNumPartitions());
            List<Row> rows = in.rows.select("_source", "id").collectAsList();
            return spark.createDataFrame(rows, in.rows.select("_source", "id").schema());
        } finally {
            spark.conf().unset(key);
            spark.conf().unset("spark.sql.files.openCostInBytes");
        }
    }

    @Test
    void aRowsLocatorDoesNotDependOnHowSparkSplitsItsFile() {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 500; i++) {
            lines.add("{\"id\":\"row-" + i + "\",\"token_ids\":[" + i + "],\"pad\":\"" + "x".repeat(60) + "\"}");
        }
        Path file = SparkTests.writeJsonl(tmp.resolve("data/part/big.jsonl"), lines);
        SparkTests.writeJsonl(tmp.resolve("data/other/big.jsonl"), lines.subList(0, 3));
        List<Integer> parts = new ArrayList<>();
        Map<String, String> whole = locators(readSplit(file, 128L << 20, parts));
        Map<String, String> split = locators(readSplit(file, 9_000, parts));
        assertTrue(parts.get(1) > parts.get(0) + 2, "the file is read in more splits: " + parts);
        assertEquals(500, whole.size());
        assertEquals(whole, split);
        assertEquals("big.jsonl:417", whole.get("row-417"));

        // Files are named below the input's folder (here a glob's fixed part), so two files of one name stay apart.
        List<Integer> p2 = new ArrayList<>();
        Map<String, List<String>> byId = new HashMap<>();
        for (Row r : readSplit(tmp.resolve("data/*/*.jsonl"), 128L << 20, p2).collectAsList()) {
            byId.computeIfAbsent(r.getString(1), k -> new ArrayList<>()).add(r.getString(0));
        }
        List<String> first = new ArrayList<>(byId.get("row-2"));
        first.sort(null);
        assertEquals(List.of("other/big.jsonl:2", "part/big.jsonl:2"), first);
    }

    private static Map<String, String> locators(Dataset<Row> rows) {
        Map<String, String> m = new HashMap<>();
        for (Row r : rows.collectAsList()) {
            m.put(r.getString(1), r.getString(0));
        }
        return m;
    }

    @Test
    void anUnevenSplitOfOneFileIsSpreadEvenly() {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 2_000; i++) {
            lines.add("{\"id\":" + i + ",\"token_ids\":[1,2,3,4,5,6,7,8]}");
        }
        Path file = SparkTests.writeJsonl(tmp.resolve("even/rows.jsonl"), lines);
        SparkSession spark = SparkTests.spark();
        long bytes = file.toFile().length();
        // Splits of 93 % and 7 % of the file, as the review saw, each in a partition of its own.
        spark.conf().set("spark.sql.files.maxPartitionBytes", String.valueOf(bytes * 93 / 100));
        spark.conf().set("spark.sql.files.openCostInBytes", String.valueOf(bytes * 93 / 100));
        try {
            JobInput in = JobInput.read(spark, spec(file, null), raw -> List.of());
            assertEquals(2, in.partitionRows.length);
            assertTrue(Math.max(in.partitionRows[0], in.partitionRows[1]) > 1_800, Arrays.toString(in.partitionRows));
            assertFalse(PartitionedRun.balanced(in.partitionRows, 2));
            List<Row> counts = PartitionedRun.spread(in.rows, false, 2)
                    .groupBy(spark_partition_id())
                    .count()
                    .collectAsList();
            long max = counts.stream().mapToLong(r -> r.getLong(1)).max().orElseThrow();
            long min = counts.stream().mapToLong(r -> r.getLong(1)).min().orElseThrow();
            assertEquals(2, counts.size());
            assertTrue(max - min <= 1, "round robin: " + counts);
        } finally {
            spark.conf().unset("spark.sql.files.maxPartitionBytes");
            spark.conf().unset("spark.sql.files.openCostInBytes");
        }
    }
}
