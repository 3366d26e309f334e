package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.ScorchCli;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every numeric option is held to its range on the driver before Spark starts work: a value out of range (given, or
 * from the --conf file) fails at once with exit 2 and a message naming the option, its value and the range.
 * {@code --threads 100000} used to start tasks with 100,000 engine threads each and hang for minutes.
 */
class OptionBoundsTest {
    @TempDir
    static Path tmp;

    static Path model;
    static Path input;

    @BeforeAll
    static void files() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(model);
        // No such file: every refusal must come before the input is read (and before Spark starts); without the
        // checks the run gets past the options and fails on the input instead, never naming the option. (A real
        // input would make a job without the checks start tasks of 100,000 threads, past the user's process limit.)
        input = tmp.resolve("in/missing.jsonl");
    }

    record Run(int exit, String err) {}

    /** Runs a command line, failing the test if it takes over 60 s (a hang, not a refusal). */
    static Run cli(String... args) {
        return assertTimeoutPreemptively(
                Duration.ofSeconds(60),
                () -> {
                    StringWriter err = new StringWriter();
                    var cl = ScorchCli.commandLine();
                    cl.setErr(new PrintWriter(err, true));
                    int exit = cl.execute(args);
                    return new Run(exit, err.toString());
                },
                "an out-of-range option must be refused at once: " + String.join(" ", args));
    }

    static Run job(String command, String... more) {
        List<String> a = new ArrayList<>(List.of(
                command,
                "--model",
                model.toString(),
                "--input",
                input.toString(),
                "--output",
                tmp.resolve("out-" + command).toString(),
                "--master",
                "local[1]"));
        a.addAll(List.of(more));
        return cli(a.toArray(new String[0]));
    }

    static void refused(Run r, String... says) {
        assertEquals(2, r.exit(), r.err());
        for (String s : says) {
            assertTrue(r.err().contains(s), "'" + s + "' in: " + r.err());
        }
    }

    @Test
    void threads100000IsRefusedAtOnceNamingTheOption() {
        refused(job("score", "--threads", "100000"), "--threads 100000: expected 1 to 1024");
        refused(job("generate", "--threads", "100000"), "--threads 100000: expected 1 to 1024");
        assertFalse(Files.exists(tmp.resolve("out-score")), "nothing was written");
        assertFalse(Files.exists(tmp.resolve("out-generate")), "nothing was written");
    }

    @Test
    void otherOutOfRangeOptionsAreRefusedNamingThem() {
        refused(job("score", "--slices", "0"), "--slices 0: expected 1 to 10000");
        refused(job("score", "--top-k", "-1"), "--top-k -1: expected 0 to 1024");
        refused(job("score", "--partitions", "0"), "--partitions 0");
        refused(job("score", "--max-batch-tokens", "2000000000"), "--max-batch-tokens 2000000000");
        refused(job("score", "--arrow-memory-mb", "-1"), "--arrow-memory-mb -1");
        refused(job("score", "--pipeline-nodes", "100000"), "--pipeline-nodes 100000");
        refused(job("score", "--threads", "0"), "--threads 0: expected 1 to 1024");
        refused(job("generate", "--top-k", "-5"), "--top-k -5");
        refused(job("generate", "--top-p", "1.5"), "--top-p 1.5");
        refused(job("generate", "--temperature", "NaN"), "--temperature NaN");
        refused(job("generate", "--n", "0"), "--n 0");
        refused(job("generate", "--max-new-tokens", "0"), "--max-new-tokens 0");
        refused(job("generate", "--max-batch-seqs", "1000000"), "--max-batch-seqs 1000000");
        refused(job("generate", "--max-cache-mb", "0"), "--max-cache-mb 0");
        refused(job("generate", "--presence-penalty", "5"), "--presence-penalty 5.0");
        refused(job("generate", "--stop-token-id", "-1"), "--stop-token-id -1");
        refused(job("score", "--lease-wait", "-1"), "--lease-wait -1: expected 0 to 604800");
    }

    @Test
    void theConfigFilesValuesGoThroughTheSameChecks() throws IOException {
        Path conf = Files.writeString(tmp.resolve("bad.conf"), "scorch.threads = 100000\n");
        refused(job("score", "--conf", conf.toString()), "--threads 100000: expected 1 to 1024");
        Path slices = Files.writeString(tmp.resolve("slices.conf"), "scorch.slices = 0\n");
        refused(job("generate", "--conf", slices.toString()), "--slices 0");
        Path topP = Files.writeString(tmp.resolve("topp.conf"), "scorch.top-p = 0\n");
        refused(job("generate", "--conf", topP.toString()), "--top-p 0.0");
        Path word = Files.writeString(tmp.resolve("word.conf"), "scorch.max-batch-tokens = lots\n");
        refused(job("score", "--conf", word.toString()), "--max-batch-tokens (scorch.max-batch-tokens in --conf) lots");
    }

    @Test
    void benchAndEvalAreHeldToTheSameRanges() {
        refused(
                cli("bench", "--model", model.toString(), "--threads", "100000"),
                "--threads 100000: expected 1 to 1024");
        refused(
                cli(
                        "eval",
                        "--model",
                        model.toString(),
                        "--suite",
                        tmp.resolve("none.yaml").toString(),
                        "--output",
                        tmp.resolve("evals").toString(),
                        "--threads",
                        "100000"),
                "--threads 100000");
    }
}
