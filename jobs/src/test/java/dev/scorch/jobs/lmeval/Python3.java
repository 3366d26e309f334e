package dev.scorch.jobs.lmeval;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/** Runs a script with the machine's python3, for live comparisons; the calling test is skipped when there is none. */
final class Python3 {
    private Python3() {}

    /** The script's stdout; skips the test (Assumptions) when python3 cannot be started. */
    static String run(String script) {
        Process p;
        try {
            p = new ProcessBuilder("python3", "-c", script)
                    .redirectErrorStream(false)
                    .start();
        } catch (IOException e) {
            Assumptions.abort("python3 is not available: " + e.getMessage());
            return null;
        }
        try {
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new IllegalStateException("python3 failed: " + err);
            }
            return out;
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }
}
