package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.kernels.PackedGemm;
import dev.scorch.engine.kernels.RowDotGemm;
import dev.scorch.jobs.ScorchCli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** bench's kernel report: the selection's line first, its kernels in the figures line, and in the JSON line under the old keys. */
class BenchCommandTest {
    @TempDir
    Path tmp;

    private static String[] bench(String... args) {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        int rc;
        try {
            rc = ScorchCli.run("bench", args);
        } finally {
            System.setOut(old);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, rc, out);
        String[] lines = out.split("\n");
        assertEquals(3, lines.length, out);
        return lines;
    }

    @Test
    void prefillAndDecodeReportTheSelectedKernels() throws Exception {
        Path model = tmp.resolve("tiny");
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.BF16, true, false, 1).write(model);
        KernelSelection k = KernelSelection.current();
        String[] common = {
            "--model", model.toString(), "--batch", "1", "--seq", "8", "--runs", "1", "--warmup", "0", "--threads", "1"
        };

        String[] prefill = bench(common);
        assertEquals("kernels: " + k.describe(), prefill[0]);
        assertTrue(
                prefill[1].startsWith("prefill 1 x 8, 1 threads (GEMM "
                        + k.prefillGemm().kernel() + ", " + k.cpuPrecision().id() + "), java "),
                prefill[1]);
        JsonNode j = new ObjectMapper().readTree(prefill[2]);
        assertEquals(k.prefillGemm().toString(), j.get("gemm_kernel").asText());
        assertEquals(k.simd(), j.get("simd").asBoolean());
        assertEquals(k.toJson(), j.get("kernels"));
        assertEquals(k.cpuPrecision().id(), j.get("cpu_precision").asText());

        // --cpu-precision: the mode where this CPU runs it, else fp32 and why; the kernels line says which.
        KernelSelection asked = k.withPrecision("bf16x3");
        String[] bf16x3 = bench(concat(common, "--cpu-precision", "bf16x3"));
        assertEquals("kernels: " + asked.describe(), bf16x3[0]);
        assertTrue(bf16x3[0].contains("; cpu_precision: " + asked.precision() + "; "), bf16x3[0]);
        assertEquals(
                PackedGemm.runs(CpuPrecision.BF16X3) ? "bf16x3" : "fp32",
                new ObjectMapper().readTree(bf16x3[2]).get("cpu_precision").asText());
        assertEquals(2, ScorchCli.run("bench", concat(common, "--cpu-precision", "fp16")));

        String[] decode = bench(concat(common, "--mode", "decode", "--steps", "2"));
        assertEquals("kernels: " + k.describe(), decode[0]);
        assertTrue(
                decode[1].contains(", 1 threads (" + k.decodeGemm().kernel() + "; BF16 weights in fp32), java "),
                decode[1]);
        JsonNode d = new ObjectMapper().readTree(decode[2]);
        assertEquals("fp32", d.get("decode_precision").asText());
        assertEquals(k.decodeGemm().toString(), d.get("decode_kernel").asText());
        assertEquals(k.toJson(), d.get("kernels"));
        // Decode in a bf16 mode where the decode kernel for it runs here, else fp32.
        String[] decodeBf16 = bench(concat(common, "--mode", "decode", "--steps", "2", "--cpu-precision", "bf16x2"));
        assertEquals(
                RowDotGemm.runs(CpuPrecision.BF16X2) && PackedGemm.runs(CpuPrecision.BF16X2) ? "bf16x2" : "fp32",
                new ObjectMapper()
                        .readTree(decodeBf16[2])
                        .get("decode_precision")
                        .asText());
    }

    private static String[] concat(String[] a, String... b) {
        String[] r = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, r, a.length, b.length);
        return r;
    }
}
