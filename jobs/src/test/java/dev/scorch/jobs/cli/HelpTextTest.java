package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.ScorchCli;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * Every command's --help renders as written: picocli formats option descriptions as format strings, so a bare '%' (as
 * in "under 1% of") made `scorch bench --help` print three "[picocli WARN] Could not format" lines and leave "%n" in the
 * text.
 */
class HelpTextTest {
    @Test
    void everyCommandsHelpRendersWithoutFormatWarnings() {
        PrintStream stderr = System.err;
        ByteArrayOutputStream traced = new ByteArrayOutputStream();
        try {
            System.setErr(new PrintStream(traced, true, StandardCharsets.UTF_8)); // picocli's tracer writes here
            for (String command : ScorchCli.commandLine().getSubcommands().keySet()) {
                CliRun r = CliRun.of(command, "--help");
                assertEquals(0, r.exit(), command + ": " + r.err());
                assertTrue(r.out().contains("Usage: scorch " + command), command + ": " + r.out());
                assertFalse(r.out().contains("%n"), command + " --help left a format specifier: " + r.out());
            }
        } finally {
            System.setErr(stderr);
        }
        String warnings = traced.toString(StandardCharsets.UTF_8);
        assertFalse(warnings.contains("picocli WARN"), warnings);
    }
}
