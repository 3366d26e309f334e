package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.CliRun;
import java.io.IOException;
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

    /** Runs a command line, failing the test if it takes over 60 s (a hang, not a refusal). */
    static CliRun cli(String... args) {
        return assertTimeoutPreemptively(
                Duration.ofSeconds(60),
                () -> CliRun.of(args),
                "an out-of-range option must be refused at once: " + String.join(" ", args));
    }

    static CliRun job(String command, String... more) {
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

    @Test
    void threads100000IsRefusedAtOnceNamingTheOption() {
        CliRun.assertRefused(job("score", "--threads", "100000"), "--threads 100000: expected 1 to 1024");
        CliRun.assertRefused(job("generate", "--threads", "100000"), "--threads 100000: expected 1 to 1024");
        assertFalse(Files.exists(tmp.resolve("out-score")), "nothing was written");
        assertFalse(Files.exists(tmp.resolve("out-generate")), "nothing was written");
    }

    @Test
    void otherOutOfRangeOptionsAreRefusedNamingThem() {
        CliRun.assertRefused(job("score", "--slices", "0"), "--slices 0: expected 1 to 10000");
        CliRun.assertRefused(job("score", "--top-k", "-1"), "--top-k -1: expected 0 to 1024");
        CliRun.assertRefused(job("score", "--partitions", "0"), "--partitions 0");
        CliRun.assertRefused(job("score", "--max-batch-tokens", "2000000000"), "--max-batch-tokens 2000000000");
        CliRun.assertRefused(job("score", "--arrow-memory-mb", "-1"), "--arrow-memory-mb -1");
        CliRun.assertRefused(job("score", "--pipeline-nodes", "100000"), "--pipeline-nodes 100000");
        CliRun.assertRefused(job("score", "--threads", "0"), "--threads 0: expected 1 to 1024");
        CliRun.assertRefused(job("generate", "--top-k", "-5"), "--top-k -5");
        CliRun.assertRefused(job("generate", "--top-p", "1.5"), "--top-p 1.5");
        CliRun.assertRefused(job("generate", "--temperature", "NaN"), "--temperature NaN");
        CliRun.assertRefused(job("generate", "--n", "0"), "--n 0");
        CliRun.assertRefused(job("generate", "--max-new-tokens", "0"), "--max-new-tokens 0");
        CliRun.assertRefused(job("generate", "--max-batch-seqs", "1000000"), "--max-batch-seqs 1000000");
        CliRun.assertRefused(job("generate", "--max-cache-mb", "0"), "--max-cache-mb 0");
        CliRun.assertRefused(job("generate", "--presence-penalty", "5"), "--presence-penalty 5.0");
        CliRun.assertRefused(job("generate", "--stop-token-id", "-1"), "--stop-token-id -1");
        CliRun.assertRefused(job("score", "--lease-wait", "-1"), "--lease-wait -1: expected 0 to 604800");
    }

    @Test
    void theConfigFilesValuesGoThroughTheSameChecks() throws IOException {
        Path conf = Files.writeString(tmp.resolve("bad.conf"), "scorch.threads = 100000\n");
        CliRun.assertRefused(job("score", "--conf", conf.toString()), "--threads 100000: expected 1 to 1024");
        Path slices = Files.writeString(tmp.resolve("slices.conf"), "scorch.slices = 0\n");
        CliRun.assertRefused(job("generate", "--conf", slices.toString()), "--slices 0");
        Path topP = Files.writeString(tmp.resolve("topp.conf"), "scorch.top-p = 0\n");
        CliRun.assertRefused(job("generate", "--conf", topP.toString()), "--top-p 0.0");
        Path word = Files.writeString(tmp.resolve("word.conf"), "scorch.max-batch-tokens = lots\n");
        CliRun.assertRefused(
                job("score", "--conf", word.toString()), "--max-batch-tokens (scorch.max-batch-tokens in --conf) lots");
    }

    @Test
    void benchAndEvalAreHeldToTheSameRanges() {
        CliRun.assertRefused(
                cli("bench", "--model", model.toString(), "--threads", "100000"),
                "--threads 100000: expected 1 to 1024");
        CliRun.assertRefused(
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
