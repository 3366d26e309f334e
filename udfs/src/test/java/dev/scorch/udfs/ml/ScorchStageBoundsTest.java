package dev.scorch.udfs.ml;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.udfs.api.ApiTests;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScoreParams;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

/**
 * Numeric settings are held to their ranges on the driver: ML Params refuse bad values in {@code set}, a saved stage
 * whose metadata was edited to threads 100000 fails at once naming threads (it used to start a task with 100,000 engine
 * threads and hang for minutes), and the API's parameters refuse them in their setters.
 */
class ScorchStageBoundsTest {
    @TempDir
    Path tmp;

    /** The message of what throws, with its causes', to look for a name in. */
    private static String failure(Executable e) {
        Throwable t = assertThrows(Throwable.class, e);
        StringBuilder s = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            s.append(c.getClass().getSimpleName())
                    .append(": ")
                    .append(c.getMessage())
                    .append(" / ");
        }
        return s.toString();
    }

    /** Sets one Param in a saved stage's metadata JSON (section paramMap or defaultParamMap), as a hand edit would. */
    private static void edit(Path saved, String section, String param, int value) throws Exception {
        Path metadata;
        try (Stream<Path> files = Files.list(saved.resolve("metadata"))) {
            metadata = files.filter(p -> p.getFileName().toString().startsWith("part-"))
                    .findFirst()
                    .orElseThrow();
        }
        ObjectMapper json = new ObjectMapper();
        ObjectNode m = (ObjectNode) json.readTree(Files.readString(metadata, StandardCharsets.UTF_8));
        ((ObjectNode) m.get(section)).put(param, value);
        Files.writeString(metadata, json.writeValueAsString(m) + "\n", StandardCharsets.UTF_8);
        // The edit is not in Hadoop's checksum file.
        Files.deleteIfExists(metadata.resolveSibling("." + metadata.getFileName() + ".crc"));
    }

    @Test
    void aSavedScorerEditedToThreads100000FailsFastNamingThreads() throws Exception {
        SparkSession spark = ApiTests.spark();
        Dataset<Row> df = spark.sql("SELECT * FROM VALUES (1, 'The cat sat') AS t(key, text)");
        Path saved = tmp.resolve("scorer");
        new ScorchScorer()
                .setModelPath(ApiTests.demoModel().toString())
                .setTextCol("text")
                .write()
                .overwrite()
                .save(saved.toString());
        edit(saved, "paramMap", "threads", 100000);

        String msg = assertTimeoutPreemptively(
                Duration.ofSeconds(60),
                () -> failure(() -> ScorchScorer.load(saved.toString()).transform(df)),
                "a scorer with threads 100000 must fail on the driver, not start a task with that many threads");
        assertTrue(msg.contains("threads") && msg.contains("100000"), msg);
        assertEquals(0, spark.sparkContext().statusTracker().getActiveStageIds().length, "no task was started");
    }

    @Test
    void aSavedGeneratorEditedOutOfRangeFailsNamingTheParam() throws Exception {
        SparkSession spark = ApiTests.spark();
        Dataset<Row> df = spark.sql("SELECT * FROM VALUES (1, 'The cat sat') AS t(key, text)");
        Path saved = tmp.resolve("generator");
        new ScorchGenerator()
                .setModelPath(ApiTests.demoModel().toString())
                .setTextCol("text")
                .write()
                .overwrite()
                .save(saved.toString());
        edit(saved, "defaultParamMap", "maxBatchSeqs", 1_000_000);

        String msg = assertTimeoutPreemptively(
                Duration.ofSeconds(60),
                () -> failure(() -> ScorchGenerator.load(saved.toString()).transform(df)));
        assertTrue(msg.contains("maxBatchSeqs") && msg.contains("1000000"), msg);
    }

    @Test
    void setRefusesValuesOutOfRangeNamingTheParam() {
        for (Map.Entry<String, Executable> e : Map.<String, Executable>of(
                        "threads", () -> new ScorchScorer().setThreads(100000),
                        "topK", () -> new ScorchScorer().setTopK(-1),
                        "windowRows", () -> new ScorchScorer().setWindowRows(0),
                        "maxBatchTokens", () -> new ScorchGenerator().setMaxBatchTokens(Integer.MAX_VALUE),
                        "topP", () -> new ScorchGenerator().setTopP(1.5),
                        "temperature", () -> new ScorchGenerator().setTemperature(Double.NaN),
                        "n", () -> new ScorchGenerator().setN(0),
                        "maxCacheMb", () -> new ScorchGenerator().setMaxCacheMb(-5))
                .entrySet()) {
            String msg = failure(e.getValue());
            assertTrue(msg.contains("IllegalArgumentException") && msg.contains(e.getKey()), e.getKey() + ": " + msg);
        }
        new ScorchScorer().setThreads(1024).setThreads(0).setTopK(1024);
        new ScorchGenerator().setTopP(1.0).setTemperature(0.0).setMinP(0.0);
    }

    @Test
    void theApiParametersRefuseValuesOutOfRangeNamingThem() {
        List<Object[]> cases = List.of(
                new Object[] {"threads 100000", (Executable) () -> new ScoreParams().setThreads(100000)},
                new Object[] {"threads 100000", (Executable) () -> new GenerateParams().setThreads(100000)},
                new Object[] {"top_k -1", (Executable) () -> ScoreParams.fromMap(Map.of("top_k", -1))},
                new Object[] {"window_rows 0", (Executable) () -> ScoreParams.fromMap(Map.of("window_rows", 0))},
                new Object[] {"arrow_memory_mb 0", (Executable) () -> ScoreParams.fromMap(Map.of("arrow_memory_mb", 0))
                },
                new Object[] {"top_p 0.0", (Executable) () -> GenerateParams.fromMap(Map.of("top_p", 0.0))},
                new Object[] {
                    "temperature Infinity",
                    (Executable) () -> new GenerateParams().setTemperature(Double.POSITIVE_INFINITY)
                },
                new Object[] {
                    "presence_penalty 3.0", (Executable) () -> GenerateParams.fromMap(Map.of("presence_penalty", 3.0))
                },
                new Object[] {"max_cache_mb -1", (Executable) () -> GenerateParams.fromMap(Map.of("max_cache_mb", -1))},
                new Object[] {"stop_token_ids -3", (Executable) () -> new GenerateParams().setStopTokenIds(List.of(-3))
                });
        for (Object[] c : cases) {
            String msg = failure((Executable) c[1]);
            assertTrue(msg.contains((String) c[0]), c[0] + ": " + msg);
        }
    }
}
