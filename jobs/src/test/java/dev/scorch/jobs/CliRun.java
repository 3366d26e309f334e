package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;

/** One `scorch` command line run in this JVM, as the CLI's entry point runs it: its exit code and what it printed. */
public record CliRun(int exit, String out, String err) {
    public static CliRun of(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        var cl = ScorchCli.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int exit = cl.execute(args);
        return new CliRun(exit, out.toString(), err.toString());
    }

    /** Asserts the command was refused (exit 2) saying each of says. */
    public static void assertRefused(CliRun r, String... says) {
        assertEquals(2, r.exit(), r.err());
        for (String s : says) {
            assertTrue(r.err().contains(s), "'" + s + "' in: " + r.err());
        }
    }
}
