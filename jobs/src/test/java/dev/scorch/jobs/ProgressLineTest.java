package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ProgressLineTest {

    /** The launcher's word on the terminal wins over the JVM's console, which JDK 22+ reports even when piped. */
    @Test
    void theLineShowsOnlyInLocalModeOnATerminal() {
        assertFalse(ProgressLine.shown("local[2]", "false", true), "piped output: no line, no counting pass");
        assertTrue(ProgressLine.shown("local[*]", "true", false));
        assertTrue(ProgressLine.shown("local[2]", null, true), "without the launcher's word, the console decides");
        assertFalse(ProgressLine.shown("local[2]", null, false));
        assertFalse(ProgressLine.shown("spark://host:7077", "true", true), "clusters show the Spark UI instead");
    }
}
