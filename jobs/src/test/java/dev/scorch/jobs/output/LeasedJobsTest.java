package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.CliRun;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every job that writes an output takes its lease first: with the lease held by another run (a live one: this JVM),
 * tokenize, score, generate and eval each exit 2 naming the holder and write nothing; score with --lease-wait runs
 * once the holder lets go.
 */
@Timeout(300)
class LeasedJobsTest {
    @TempDir
    static Path tmp;

    static Path model;
    static Path texts;
    static final FileSystem LOCAL = local();

    @BeforeAll
    static void files() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(model);
        // A session already running in this JVM, as in a notebook (or the rest of the suite): the CLI's settings reach
        // the job through the session's runtime settings only.
        dev.scorch.jobs.score.SparkTests.spark();
        texts = Files.writeString(
                tmp.resolve("texts.jsonl"), "{\"id\":1,\"text\":\"hello world\",\"prompt\":\"hi\"}\n");
    }

    static FileSystem local() {
        try {
            return FileSystem.getLocal(new Configuration());
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    static OutputLease hold(Path out) throws IOException {
        return OutputLease.acquire(
                LOCAL, new org.apache.hadoop.fs.Path(out.toUri()), "test", OutputLease.Policy.DEFAULT);
    }

    static void refusedWhileHeld(Path out, String... args) throws IOException {
        try (OutputLease held = hold(out)) {
            CliRun r = CliRun.of(args);
            assertEquals(2, r.exit(), r.err());
            assertTrue(
                    r.err().contains("is being written by another job")
                            && r.err().contains(held.runId())
                            && r.err().contains("pid " + ProcessHandle.current().pid()),
                    r.err());
            assertFalse(Files.exists(out), "nothing written: " + out);
        }
        Path leaseFile = out.resolveSibling("_" + out.getFileName() + ".scorch-lease");
        assertFalse(Files.exists(leaseFile), "the lease is gone with its holder");
    }

    @Test
    void tokenize() throws IOException {
        Path out = tmp.resolve("tok/ids.jsonl");
        refusedWhileHeld(
                out,
                "tokenize",
                "--tokenizer",
                model.toString(),
                "--input",
                texts.toString(),
                "--output",
                out.toString());
    }

    @Test
    void score() throws IOException {
        Path out = tmp.resolve("score-out");
        refusedWhileHeld(out, job("score", out));
    }

    @Test
    void generate() throws IOException {
        Path out = tmp.resolve("generate-out");
        refusedWhileHeld(out, job("generate", out, "--max-new-tokens", "2"));
    }

    @Test
    void eval() throws IOException {
        Path out = tmp.resolve("evals");
        refusedWhileHeld(
                out,
                "eval",
                "--model",
                model.toString(),
                "--suite",
                Path.of("../conf/evals/demo-suite.yaml").toAbsolutePath().toString(),
                "--output",
                out.toString(),
                "--master",
                "local[2]");
    }

    @Test
    void scoreWithLeaseWaitRunsOnceTheHolderLetsGo() throws Exception {
        Path out = tmp.resolve("waited-out");
        OutputLease held = hold(out);
        // The holder lets go once the job says it is waiting (on System.err, which this test tees).
        java.io.ByteArrayOutputStream said = new java.io.ByteArrayOutputStream();
        java.io.PrintStream err = System.err;
        System.setErr(new java.io.PrintStream(new org.apache.commons.io.output.TeeOutputStream(err, said), true));
        Thread release = new Thread(() -> {
            try {
                long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
                while (!said.toString().contains("waiting for test run " + held.runId())
                        && System.nanoTime() < deadline) {
                    Thread.sleep(50);
                }
                held.close();
            } catch (IOException | InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        CliRun r;
        try {
            release.start();
            r = CliRun.of(job("score", out, "--lease-wait", "120"));
            release.join();
        } finally {
            System.setErr(err);
        }
        assertEquals(0, r.exit(), r.err());
        assertTrue(said.toString().contains("waiting for test run " + held.runId()), "it waited");
        assertTrue(Files.exists(out.resolve("_scorch.json")));
    }

    static String[] job(String job, Path out, String... more) {
        String[] base = {
            job,
            "--model",
            model.toString(),
            "--input",
            texts.toString(),
            "--output",
            out.toString(),
            "--output-format",
            "jsonl",
            "--master",
            "local[2]",
            "--spark-conf",
            "spark.ui.enabled=false"
        };
        String[] all = java.util.Arrays.copyOf(base, base.length + more.length);
        System.arraycopy(more, 0, all, base.length, more.length);
        return all;
    }
}
