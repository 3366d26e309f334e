package dev.scorch.udfs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The Python module's own tests (python/tests, plain unittest against a stub py4j gateway: PySpark is not needed), run
 * with the module's suite so that they cannot be forgotten.
 */
class PythonModuleTest {
    @Test
    void pythonTestsPass() throws IOException, InterruptedException {
        Path python = Path.of("..", "python").toAbsolutePath().normalize();
        Process p = new ProcessBuilder("python3", "-m", "unittest", "discover", "-s", "tests", "-v")
                .directory(python.toFile())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "python3 did not finish");
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("Ran ") && out.trim().endsWith("OK"), out);
    }
}
