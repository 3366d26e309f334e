package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.udfs.model.ExecutorModelCache;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Runs that cannot succeed fail on the driver with a message naming the problem, before any scoring task runs. */
class ScoreJobFailuresTest {
    @TempDir
    Path tmp;

    /** What Spark ran during one test: jobs, tasks, and each stage's call site. */
    static final class Recorder extends SparkListener {
        final List<Integer> jobs = new CopyOnWriteArrayList<>();
        final List<String> stageDetails = new CopyOnWriteArrayList<>();
        final List<Long> tasks = new CopyOnWriteArrayList<>();

        @Override
        public void onJobStart(SparkListenerJobStart e) {
            jobs.add(e.jobId());
        }

        @Override
        public void onStageSubmitted(SparkListenerStageSubmitted e) {
            stageDetails.add(e.stageInfo().details());
        }

        @Override
        public void onTaskStart(SparkListenerTaskStart e) {
            tasks.add(e.taskInfo().taskId());
        }
    }

    Recorder recorder;
    int loadsBefore;

    @BeforeEach
    void listen() {
        recorder = new Recorder();
        SparkTests.spark().sparkContext().addSparkListener(recorder);
        loadsBefore = ExecutorModelCache.loads();
    }

    @AfterEach
    void unlisten() {
        SparkTests.spark().sparkContext().removeSparkListener(recorder);
    }

    Path goodInput() {
        return SparkTests.writeJsonl(tmp.resolve("in.jsonl"), List.of(SparkTests.row(1, new long[] {1, 2, 3})));
    }

    void assertNothingRan() {
        SparkTests.drainListeners();
        assertEquals(List.of(), recorder.jobs, "no Spark job may start");
        assertEquals(List.of(), recorder.tasks, "no Spark task may start");
        assertEquals(loadsBefore, ExecutorModelCache.loads(), "no model load");
    }

    /** Schema inference of the input may run a job; nothing after it (numbering, scoring, writing) may. */
    void assertNoScoringRan() {
        SparkTests.drainListeners();
        for (String d : recorder.stageDetails) {
            assertFalse(
                    d.contains("PartitionedRun.write") || d.contains("PartitionedRun.normalise"),
                    "a stage ran past input validation:\n" + d);
        }
        assertEquals(loadsBefore, ExecutorModelCache.loads(), "no model load");
    }

    @Test
    void existingOutputNeedsOverwriteOrResume() throws Exception {
        Path out = tmp.resolve("scores");
        Files.createDirectories(out);
        Files.writeString(out.resolve("part-00000.json"), "{\"id\":1}\n");
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> SparkTests.spec(SparkTests.conformanceModel(), goodInput(), out)
                        .run());
        assertTrue(e.getMessage().contains(out.toString()), e.getMessage());
        assertTrue(
                e.getMessage().contains("exists")
                        && e.getMessage().contains("--overwrite")
                        && e.getMessage().contains("--resume"),
                e.getMessage());
        assertNothingRan();
        assertTrue(Files.isRegularFile(out.resolve("part-00000.json")), "the existing output is left alone");
    }

    @Test
    void missingModelFolderIsNamed() {
        Path model = tmp.resolve("no-such-model");
        Path out = tmp.resolve("scores");
        RuntimeException e = assertThrows(
                RuntimeException.class,
                () -> SparkTests.spec(model, goodInput(), out).run());
        assertTrue(e.getMessage().contains(model.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("missing"), e.getMessage());
        assertNothingRan();
        assertFalse(Files.exists(out), "no output folder for a failed run");
    }

    /** A quantization format Scorch does not run (here MXFP4 in compressed-tensors) is refused on the driver, named. */
    @Test
    void unsupportedQuantizationFormatIsRefusedOnTheDriver() throws Exception {
        Path model = tmp.resolve("mxfp4");
        new dev.scorch.engine.demo.DemoModelWriter(
                        dev.scorch.engine.demo.DemoPreset.TINY,
                        dev.scorch.engine.demo.DemoModelWriter.Weights.INT4,
                        true,
                        false,
                        3)
                .write(model);
        Path cfg = model.resolve("config.json");
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        com.fasterxml.jackson.databind.node.ObjectNode root =
                (com.fasterxml.jackson.databind.node.ObjectNode) json.readTree(cfg.toFile());
        ((com.fasterxml.jackson.databind.node.ObjectNode) root.get("quantization_config"))
                .put("format", "mxfp4-pack-quantized");
        json.writeValue(cfg.toFile(), root);
        Path out = tmp.resolve("scores");
        RuntimeException e = assertThrows(
                RuntimeException.class,
                () -> SparkTests.spec(model, goodInput(), out).run());
        for (String s :
                List.of(cfg.toString(), "'format'", "mxfp4-pack-quantized", "pack-quantized", "float-quantized")) {
            assertTrue(e.getMessage().contains(s), "should name " + s + ": " + e.getMessage());
        }
        assertNothingRan();
        assertFalse(Files.exists(out), "no output folder for a failed run");
    }

    @Test
    void inputWithoutTokenIdsOrTextIsRejected() {
        Path in = SparkTests.writeJsonl(
                tmp.resolve("other.jsonl"), List.of("{\"id\":1,\"text\":\"hello\",\"ids\":[1,2]}"));
        Path out = tmp.resolve("scores");
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> SparkTests.spec(SparkTests.conformanceModel(), in, out).run());
        assertTrue(e.getMessage().contains(in.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("neither a 'token_ids' nor a 'prompt' column"), e.getMessage());
        assertTrue(e.getMessage().contains("--token-ids-column"), e.getMessage());
        assertNoScoringRan();
        assertFalse(Files.exists(out), "no output folder for a failed run");
    }

    @Test
    void unreadableInputIsNamed() {
        Path in = tmp.resolve("missing.jsonl");
        Path out = tmp.resolve("scores");
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> SparkTests.spec(SparkTests.conformanceModel(), in, out).run());
        assertTrue(e.getMessage().contains(in.toString()) && e.getMessage().contains("cannot read"), e.getMessage());
        assertNothingRan();
        assertFalse(Files.exists(out));
    }
}
