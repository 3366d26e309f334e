package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** When a benchmark's warm-up may stop: runs in a row with (next to) no compilation, or the cap. */
class JitQuietTest {
    private long compiled; // ms, as the compilers' bean counts them

    private void run(JitQuiet jit, long compiledMillis, long wallMillis) {
        jit.begin();
        compiled += compiledMillis;
        jit.end(wallMillis * 1_000_000);
    }

    @Test
    void quietAfterThreeRunsInARowUnderOnePercentCompiling() {
        JitQuiet jit = new JitQuiet(() -> compiled);
        assertFalse(jit.quiet(), "nothing watched yet");
        run(jit, 0, 400);
        run(jit, 3, 400); // 0.75 %
        assertFalse(jit.quiet(), "two quiet runs");
        run(jit, 5, 400); // 1.25 %: the count starts again
        run(jit, 0, 400);
        run(jit, 1, 400);
        assertFalse(jit.quiet(), "two quiet runs since the last busy one");
        run(jit, 0, 400);
        assertTrue(jit.quiet());
    }

    @Test
    void theCapEndsAWarmUpThatNeverGoesQuiet() {
        JitQuiet jit = new JitQuiet(() -> compiled);
        for (int i = 0; i < JitQuiet.MAX_RUNS - 1; i++) {
            run(jit, 50, 400);
        }
        assertFalse(jit.quiet());
        run(jit, 50, 400);
        assertTrue(jit.quiet());
    }

    @Test
    void aJvmThatDoesNotCountCompilationIsQuietAtOnce() {
        assertTrue(new JitQuiet(null).quiet());
    }
}
