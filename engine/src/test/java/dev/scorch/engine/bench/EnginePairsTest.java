package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.testing.DemoModels;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The line protocol dev/gemm-paired and dev/prefill-paired speak with EnginePairs. */
class EnginePairsTest {
    private static String[] serve(String commands) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        EnginePairs.serve(
                new BufferedReader(new StringReader(commands)),
                new PrintStream(bytes, true, StandardCharsets.UTF_8),
                2);
        return bytes.toString(StandardCharsets.UTF_8).split("\n");
    }

    @Test
    void answersEachCommandWithOneLine() throws Exception {
        String[] out =
                serve("info\nshape 20 300 40 BF16\ntime 0.01\nshape 3 256 7 F8_E4M3\ntime 0\ndecode 0\nquit\ntime 1\n");
        assertEquals(6, out.length, String.join("|", out)); // nothing after quit
        assertTrue(out[0].contains(System.getProperty("java.vm.version")), out[0]);
        for (int i : new int[] {2, 4, 5}) {
            assertTrue(out[i - 1].equals("ok") || i == 5, out[i - 1]);
            String[] t = out[i].split(" ");
            double median = Double.parseDouble(t[0]);
            assertTrue(median > 0 && median < 1, out[i]);
            assertTrue(Integer.parseInt(t[1]) >= 3, "at least three calls timed: " + out[i]);
        }
    }

    @Test
    void prefillRunsAnswerSecondsAndHeapBytes() throws Exception {
        String[] out = serve("prefill " + DemoModels.tinyBf16() + " 2 16\nrun\nrun\nquit\n");
        assertEquals(3, out.length, String.join("|", out));
        String[] ok = out[0].split(" ");
        assertEquals("ok", ok[0]);
        double flops = PrefillBenchmark.modelFlops(
                DeepseekV3Model.load(DemoModels.tinyBf16()).config(), 2, 16);
        assertEquals(flops, Double.parseDouble(ok[1]), "2 sequences of 16 tokens: " + out[0]);
        for (int i : new int[] {1, 2}) {
            String[] t = out[i].split(" ");
            double secs = Double.parseDouble(t[0]);
            assertTrue(secs > 0 && secs < 60, out[i]);
            assertTrue(Long.parseLong(t[1]) >= 0, out[i]);
        }
    }

    @Test
    void refusesTimingBeforeAShapeAndUnknownCommands() {
        assertThrows(IllegalStateException.class, () -> serve("time 0.01\n"));
        assertThrows(IllegalStateException.class, () -> serve("decode 0.01\n"));
        assertThrows(IllegalStateException.class, () -> serve("run\n"));
        assertThrows(IllegalArgumentException.class, () -> serve("shape 2 2 2 BF16\nfrobnicate\n"));
    }
}
