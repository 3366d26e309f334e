package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.cpu.CpuDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.jobs.score.SparkTests.Scored;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.score.ScoreOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The score job with --pipeline-nodes on a local[3] master: the conformance model's 3 layers split over 1, 2 and 3
 * stages, each a task of one Spark barrier stage on the CPU device (the executor's CPU kernels), handing fp32 hidden states
 * to the next over TCP on 127.0.0.1, three batches in the pipeline at once. Every good row's log-probs equal, bit for
 * bit, those of one CPU device holding the whole model (Scorer,
 * the same precision); error rows are the single-process job's; a stage that fails once makes Spark rerun the whole
 * barrier stage and every row still comes out exactly once; a run whose second slice keeps failing is finished by
 * --resume.
 */
@Timeout(600)
class ScoreJobPipelineTest {
    @TempDir
    static Path tmp;

    static SparkSession spark;
    static Path input;
    /** Scorer's scores on one HostDevice, by row id. */
    static Map<String, SequenceScore> reference = new java.util.TreeMap<>();

    static int rows;

    @BeforeAll
    static void setUp() {
        SparkTests.stopShared(); // one SparkContext per JVM: this one has three task slots
        spark = SparkSession.builder()
                .master("local[3]")
                .appName("scorch-pipeline-test")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.default.parallelism", "2")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.scorch.pipeline.connectTimeout", "60s")
                .config("spark.scorch.pipeline.idleTimeout", "120s")
                .config("spark.scorch.pipeline.batchesInFlight", "3") // several in flight at every failure
                .getOrCreate();

        input = writeInput(tmp);
    }

    /**
     * The test's input under dir: the golden prompts, 6 seeded random rows of 2..24 tokens, a token outside the
     * vocabulary, a row without an id; fills rows and reference (Scorer on one HostDevice).
     */
    static Path writeInput(Path dir) {
        List<String> lines = new ArrayList<>();
        List<long[]> good = new ArrayList<>(SparkTests.goldenPrompts());
        Random r = new Random(29);
        for (int i = 0; i < 6; i++) {
            good.add(SparkTests.randomTokens(r, 2 + r.nextInt(23), 512));
        }
        for (int i = 0; i < good.size(); i++) {
            lines.add(SparkTests.row(i, good.get(i)));
        }
        lines.add("{\"id\":\"oov\",\"token_ids\":[1,2,99999]}");
        lines.add("{\"token_ids\":[1,2,3]}");
        rows = lines.size();
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(SparkTests.conformanceModel()),
                new CpuDevice(ExecutorModelCache.ops(2, null)),
                ScoreOptions.defaultGpuPrecision())) {
            Scorer scorer = new Scorer(m);
            for (int i = 0; i < good.size(); i++) {
                int[] t = new int[good.get(i).length];
                for (int k = 0; k < t.length; k++) {
                    t[k] = (int) good.get(i)[k];
                }
                reference.put(
                        String.valueOf(i),
                        scorer.score(List.of(new ScoreRequest(t, 1, 0, LogitsMode.NONE)))
                                .get(0));
            }
        }
        return SparkTests.writeJsonl(dir.resolve("in/rows.jsonl"), lines);
    }

    @AfterAll
    static void tearDown() {
        spark.stop();
        SparkTests.stopShared();
    }

    static SparkTests.Spec spec(Path out, int nodes) {
        return SparkTests.spec(SparkTests.conformanceModel(), input, out)
                .pipelineNodes(nodes)
                .maxBatchTokens(32) // several batches per stream
                .windowRows(8);
    }

    /** The output's rows: every input row once, the good ones with the reference's bits. */
    private static Map<String, Scored> checkRows(Path out) {
        return checkRows(spark, out);
    }

    static Map<String, Scored> checkRows(SparkSession session, Path out) {
        Map<String, Scored> got = SparkTests.readOutput(session, out, "parquet"); // fails on a duplicate id
        assertEquals(rows, got.size(), "rows in " + out);
        for (Map.Entry<String, SequenceScore> e : reference.entrySet()) {
            Scored s = got.get(e.getKey());
            assertNotNull(s, "row " + e.getKey());
            assertNull(s.error(), "row " + e.getKey());
            float[] want = e.getValue().tokenLogprobs();
            assertEquals(want.length, s.tokenLogprobs().size(), "row " + e.getKey());
            assertNull(s.tokenLogprobs().get(0), "the first token is context only");
            for (int k = 1; k < want.length; k++) {
                assertEquals(
                        Float.floatToRawIntBits(want[k]),
                        Float.floatToRawIntBits(s.tokenLogprobs().get(k)),
                        "row " + e.getKey() + " token " + k);
            }
            assertEquals(
                    Double.doubleToRawLongBits(e.getValue().sumLogprob()),
                    Double.doubleToRawLongBits(s.sum()),
                    "row " + e.getKey());
        }
        assertTrue(
                got.get("oov").error().startsWith("token id 99999 at position 2 is outside the vocabulary"),
                got.get("oov").error());
        assertEquals("id is null", got.get("null").error().replaceAll(" \\(input row .*\\)$", ""));
        return got;
    }

    @Test
    void oneTwoAndThreeStagesGiveTheSingleDeviceBits() {
        Map<String, Scored> one = null;
        for (int nodes = 1; nodes <= 3; nodes++) {
            Path out = tmp.resolve("out-" + nodes);
            ScoreSummary s = spec(out, nodes).run(spark);
            assertEquals(rows, s.rows());
            assertEquals(2, s.errors());
            Map<String, Scored> got = checkRows(out);
            if (one == null) {
                one = got;
            } else {
                assertEquals(one, got, nodes + " stages"); // every column of every row, errors included
            }
        }
        assertTrue(assertThrows(
                        IllegalArgumentException.class,
                        () -> spec(tmp.resolve("out-4"), 4).run(spark))
                .getMessage()
                .startsWith("4 pipeline stages for 3 layers"));
    }

    @Test
    void aStageThatFailsOnceMakesSparkRerunTheBarrierStage() throws Exception {
        List<String> stages = java.util.Collections.synchronizedList(new ArrayList<>()); // "id.attempt tasks ok|failed"
        SparkListener l = new SparkListener() {
            @Override
            public void onStageCompleted(SparkListenerStageCompleted e) {
                var i = e.stageInfo();
                stages.add(i.stageId() + "." + i.attemptNumber() + " " + i.numTasks() + " "
                        + (i.failureReason().isDefined() ? "failed" : "ok"));
            }
        };
        spark.sparkContext().addSparkListener(l);
        Path marker = tmp.resolve("failed-once");
        spark.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", "0:0:once:" + marker);
        try {
            Path out = tmp.resolve("out-retry");
            ScoreSummary s = spec(out, 2).run(spark);
            assertTrue(Files.exists(marker), "stage 0 failed once");
            spark.sparkContext().listenerBus().waitUntilEmpty(30_000);
            // The barrier stage (2 tasks) failed in its first attempt and succeeded, whole, in its second.
            String failed = stages.stream()
                    .filter(x -> x.endsWith(".0 2 failed"))
                    .findFirst()
                    .orElseThrow(() -> new AssertionError("no failed barrier attempt in " + stages));
            String id = failed.substring(0, failed.indexOf('.'));
            assertTrue(stages.contains(id + ".1 2 ok"), stages.toString());
            assertEquals(rows, s.rows(), "rows counted once: the failed attempt's counts are dropped");
            checkRows(out);
        } finally {
            spark.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", null);
            spark.sparkContext().removeSparkListener(l);
        }
    }

    @Test
    void aRunWhoseSecondSliceKeepsFailingIsFinishedByResume() throws Exception {
        Path out = tmp.resolve("out-resume");
        spark.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", "1:1:always:-");
        try {
            assertThrows(Exception.class, () -> spec(out, 2).slices(3).run(spark));
        } finally {
            spark.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", null);
        }
        Path partial = OutputFolder.partialOf(new org.apache.hadoop.fs.Path(out.toString()))
                .toUri()
                .getPath()
                .transform(Path::of);
        long written = spark.read().parquet(partial.toString()).count();
        assertTrue(written > 0 && written < rows, written + " rows written by the first slice");

        ScoreSummary s = spec(out, 2).slices(3).write(WriteMode.RESUME).run(spark);
        assertEquals(written, s.skippedByResume());
        assertEquals(rows - written, s.rows());
        checkRows(out);
    }
}
