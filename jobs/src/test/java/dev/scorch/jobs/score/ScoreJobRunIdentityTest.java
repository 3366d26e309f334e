package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * --resume continues only the run that was started. An interrupted run (a partial folder holding half the rows, as a
 * killed run leaves it) is resumed with another model, an edited input or another result option: each is refused
 * naming what changed, and the partial folder is left byte for byte as it was. Resumed with what it started with, the
 * output equals a clean run's; a partial folder that does not record its run's identity is refused.
 */
@Timeout(300)
class ScoreJobRunIdentityTest {
    static final int ROWS = 40;
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    Path model;
    Path in;
    Path out;
    Path partial;
    Map<String, Scored> clean;

    @BeforeEach
    void interruptedRun() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 99).write(model);
        List<String> rows = new ArrayList<>();
        Random r = new Random(5);
        for (int i = 0; i < ROWS; i++) {
            rows.add(
                    SparkTests.row("q" + i, SparkTests.randomTokens(r, 8 + r.nextInt(9), DemoPreset.TINY.vocabSize())));
        }
        in = SparkTests.writeJsonl(tmp.resolve("in/prompts.jsonl"), rows);
        out = tmp.resolve("out");
        partial = tmp.resolve("_out.scorch-partial");

        Path cleanOut = tmp.resolve("clean");
        SparkTests.spec(model, in, cleanOut).outputFormat("jsonl").run();
        clean = SparkTests.readOutput(cleanOut, "jsonl");
        assertEquals(ROWS, clean.size());

        // What a run killed after its first slice leaves: the partial folder, marked unfinished, with some rows.
        SparkTests.spec(model, in, out).outputFormat("jsonl").run();
        Files.move(out, partial);
        ObjectNode marker =
                (ObjectNode) JSON.readTree(partial.resolve("_scorch.json").toFile());
        marker.put("complete", false);
        writeMarker(marker);
        List<Path> parts = ScoreJobResumeTest.committedParts(partial);
        assertEquals(2, parts.size(), "two partitions, two part files");
        Files.delete(parts.get(0));
        Files.deleteIfExists(partial.resolve("." + parts.get(0).getFileName() + ".crc"));
    }

    @Test
    void resumeWithAnotherModelIsRefused() throws IOException {
        Path other = tmp.resolve("other-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(other);
        String msg =
                refused(SparkTests.spec(other, in, out).outputFormat("jsonl").resume(true));
        assertTrue(msg.contains("the model is"), msg);
    }

    @Test
    void resumeWithAnEditedInputIsRefused() throws IOException {
        List<String> lines = new ArrayList<>(Files.readAllLines(in));
        lines.set(3, SparkTests.row("q3", new long[] {1, 2, 3, 4, 5}));
        Files.write(in, lines);
        String msg =
                refused(SparkTests.spec(model, in, out).outputFormat("jsonl").resume(true));
        assertTrue(msg.contains("prompts.jsonl") && msg.contains("changed"), msg);
    }

    @Test
    void resumeWithAnotherFileInTheInputFolderIsRefused() throws IOException {
        SparkTests.writeJsonl(in.resolveSibling("more.jsonl"), List.of(SparkTests.row("extra", new long[] {1, 2, 3})));
        String msg = refused(SparkTests.spec(model, in.getParent(), out)
                .inputFormat("json")
                .outputFormat("jsonl")
                .resume(true));
        assertTrue(msg.contains("input"), msg);
    }

    @Test
    void resumeWithAnotherResultOptionIsRefused() throws IOException {
        String msg = refused(
                SparkTests.spec(model, in, out).outputFormat("jsonl").topK(2).resume(true));
        assertTrue(msg.contains("--top-k is 2"), msg);
    }

    @Test
    void resumeOfAPartialFolderWithoutItsRunIsRefused() throws IOException {
        ObjectNode marker =
                (ObjectNode) JSON.readTree(partial.resolve("_scorch.json").toFile());
        marker.remove("run");
        writeMarker(marker);
        String msg =
                refused(SparkTests.spec(model, in, out).outputFormat("jsonl").resume(true));
        assertTrue(msg.contains("does not record"), msg);
    }

    @Test
    void resumeWithWhatTheRunStartedWithEqualsACleanRun() throws IOException {
        // threads and partitions change no bits: a resume may use others
        ScoreSummary s = SparkTests.spec(model, in, out)
                .outputFormat("jsonl")
                .threads(2)
                .partitions(3)
                .resume(true)
                .run();
        assertTrue(s.skippedByResume() > 0 && s.rows() > 0, "half skipped, half scored: " + s);
        Map<String, Scored> got = SparkTests.readOutput(out, "jsonl");
        assertEquals(clean.keySet(), got.keySet());
        for (String id : clean.keySet()) {
            assertNull(got.get(id).error(), id);
            assertEquals(clean.get(id).tokenLogprobs(), got.get(id).tokenLogprobs(), id);
        }
        ObjectNode marker =
                (ObjectNode) JSON.readTree(out.resolve("_scorch.json").toFile());
        assertTrue(marker.path("complete").asBoolean(), marker.toString());
        assertEquals(
                marker.path("run").path("model").asText(), marker.path("model").asText(), "the marker names its model");
    }

    /** Rewrites the partial folder's marker (and drops the local file system's checksum of the old one). */
    private void writeMarker(ObjectNode marker) throws IOException {
        JSON.writeValue(partial.resolve("_scorch.json").toFile(), marker);
        Files.deleteIfExists(partial.resolve("._scorch.json.crc"));
    }

    /** Runs a resume that must be refused; asserts the partial folder and the output are untouched. */
    private String refused(SparkTests.Spec spec) throws IOException {
        Map<String, String> before = tree(partial);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, spec::run);
        String msg = e.getMessage();
        assertTrue(msg.contains("--resume continues only the run") || msg.contains("does not record"), msg);
        assertEquals(before, tree(partial), "the partial run is left as it was");
        assertTrue(Files.notExists(out), "no output appears");
        return msg;
    }

    /** Every file under a folder with its SHA-256. */
    static Map<String, String> tree(Path dir) throws IOException {
        Map<String, String> m = new TreeMap<>();
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.filter(Files::isRegularFile).toList()) {
                try {
                    m.put(
                            dir.relativize(p).toString(),
                            HexFormat.of()
                                    .formatHex(
                                            MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(p))));
                } catch (java.security.NoSuchAlgorithmException e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        return m;
    }
}
