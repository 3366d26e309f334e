package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.score.SparkTests.Scored;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * --backend on local[2], a machine without a usable GPU: auto scores on the CPU with the same output as the CPU
 * backend; cuda fails before any task runs, naming why CUDA is unavailable, in the score and the generate job.
 */
class ScoreJobBackendTest {
    @TempDir
    Path tmp;

    /** Runs the CLI in this JVM (it reuses the shared local[2] session); returns the exit code and what it wrote to stderr. */
    static Object[] cli(String... args) {
        SparkTests.spark();
        CommandLine cl = ScorchCli.commandLine();
        StringWriter err = new StringWriter();
        cl.setErr(new PrintWriter(err, true));
        int rc = cl.execute(args);
        return new Object[] {rc, err.toString()};
    }

    static String[] score(Path input, Path out, String... more) {
        List<String> a = new ArrayList<>(List.of(
                "score",
                "--model",
                SparkTests.conformanceModel().toString(),
                "--input",
                input.toString(),
                "--output",
                out.toString(),
                "--output-format",
                "jsonl",
                "--master",
                "local[2]",
                "--partitions",
                "2"));
        a.addAll(Arrays.asList(more));
        return a.toArray(String[]::new);
    }

    @Test
    void autoWithoutAGpuScoresOnCpuWithTheCpuBackendsOutput() {
        assumeFalse(
                Cuda.probe().available(), "this machine has CUDA: auto would pick it only where Spark assigns GPUs");
        Path input = SparkTests.goldenInput(tmp);
        Path auto = tmp.resolve("auto");
        int gpuLoads = ExecutorModelCache.gpuLoads();
        Object[] r = cli(score(input, auto, "--backend", "auto", "--gpu-precision", "fp32"));
        assertEquals(0, r[0], (String) r[1]);
        assertEquals(gpuLoads, ExecutorModelCache.gpuLoads(), "no GPU model loaded");

        Path cpu = tmp.resolve("cpu");
        SparkTests.spec(SparkTests.conformanceModel(), input, cpu)
                .outputFormat("jsonl")
                .backend(BackendMode.CPU)
                .run();
        Map<String, Scored> want = SparkTests.readOutput(cpu, "jsonl");
        Map<String, Scored> got = SparkTests.readOutput(auto, "jsonl");
        assertEquals(SparkTests.goldenPrompts().size(), got.size());
        assertEquals(want, got, "auto on a machine without a GPU is the CPU backend, bit for bit");

        // --cpu-precision reaches the tasks: where this CPU runs bf16x3 the scores move (within its error), where it
        // lacks AVX512-BF16 the tasks fall back to fp32 and give the fp32 bits; the run records the mode asked.
        Path bf16x3 = tmp.resolve("bf16x3");
        Object[] b = cli(score(input, bf16x3, "--backend", "cpu", "--cpu-precision", "bf16x3"));
        assertEquals(0, b[0], (String) b[1]);
        Map<String, Scored> parts = SparkTests.readOutput(bf16x3, "jsonl");
        assertEquals(want.keySet(), parts.keySet());
        boolean runs = dev.scorch.engine.kernels.KernelSelection.current()
                        .withPrecision("bf16x3")
                        .cpuPrecision()
                == dev.scorch.engine.kernels.CpuPrecision.BF16X3;
        if (!runs) {
            assertEquals(want, parts, "bf16x3 where this CPU lacks it: fp32, bit for bit");
        } else {
            org.junit.jupiter.api.Assertions.assertNotEquals(want, parts, "bf16x3 ran: its roundings differ");
        }
        Object[] resumed = cli(score(input, bf16x3, "--backend", "cpu", "--cpu-precision", "fp32", "--resume"));
        assertEquals(2, resumed[0], "a resume with another --cpu-precision is another run: " + resumed[1]);
        assertTrue(((String) resumed[1]).contains("cpu-precision"), (String) resumed[1]);
    }

    @Test
    void cudaWithoutCudaFailsFastNamingTheReason() {
        Cuda.Availability a = Cuda.probe();
        assumeFalse(a.available(), "this machine has CUDA");
        Path out = tmp.resolve("cuda");
        Object[] r = cli(score(SparkTests.goldenInput(tmp), out, "--backend", "cuda"));
        assertEquals(2, r[0]);
        String err = (String) r[1];
        assertTrue(err.contains("--backend cuda: CUDA unavailable: " + a.detail()), err);
        assertFalse(Files.exists(out), "nothing was written");
    }

    @Test
    void generateWithCudaWithoutCudaFailsFastAndBadValuesAreNamed() {
        Cuda.Availability a = Cuda.probe();
        assumeFalse(a.available(), "this machine has CUDA");
        Object[] gen = cli(
                "generate",
                "--model",
                SparkTests.conformanceModel().toString(),
                "--input",
                "unused.jsonl",
                "--output",
                tmp.resolve("gen").toString(),
                "--backend",
                "cuda",
                "--master",
                "local[2]");
        assertEquals(2, gen[0]);
        assertTrue(((String) gen[1]).contains("--backend cuda: CUDA unavailable: " + a.detail()), (String) gen[1]);
        assertFalse(Files.exists(tmp.resolve("gen")), "nothing was written");

        Path input = SparkTests.goldenInput(tmp);
        Object[] badBackend = cli(score(input, tmp.resolve("b1"), "--backend", "gpu"));
        assertEquals(2, badBackend[0]);
        assertTrue(((String) badBackend[1]).contains("--backend 'gpu': expected one of auto, cpu, cuda"), (String)
                badBackend[1]);
        Object[] badPrecision = cli(score(input, tmp.resolve("b2"), "--gpu-precision", "fp16"));
        assertEquals(2, badPrecision[0]);
        assertTrue(((String) badPrecision[1]).contains("--gpu-precision: GEMM precision 'fp16'"), (String)
                badPrecision[1]);
    }
}
