package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** A GPU task's windows grow to hold two batches' tokens, within a quarter of the Arrow memory; a CPU task's do not. */
class WindowSizerTest {
    @Test
    void cpuWindowsKeepTheAskedRows() {
        WindowSizer w = new WindowSizer(256, 0, 1L << 30);
        w.observe(256, 256 * 10, 1 << 20);
        assertEquals(256, w.nextRows());
    }

    @Test
    void growsToTheTargetTokens() {
        WindowSizer w = new WindowSizer(256, 32768, 1L << 30);
        assertEquals(256, w.nextRows(), "no rows seen yet");
        w.observe(256, 256 * 20, 256 * 1000); // 20 tokens a row, 1000 Arrow bytes a row
        assertEquals(1639, w.nextRows()); // ceil(32768 / 20)
        w.observe(1639, 1639 * 60, 1639 * 1000); // now 1895 rows of 5,120 + 98,340 = 103,460 tokens
        assertEquals(601, w.nextRows()); // ceil(32768 / (103460 / 1895)) = ceil(600.19)
        w.observe(100, 0, 0); // rows of errors only (no tokens): counted as rows
        assertEquals(632, w.nextRows()); // ceil(32768 / (103460 / 1995)) = ceil(631.86)
    }

    @Test
    void neverBelowTheAskedRowsNorAboveAQuarterOfTheArrowMemory() {
        WindowSizer w = new WindowSizer(256, 32768, 1L << 20);
        w.observe(256, 256 * 4096, 256 * 64); // long rows: 8 would do, the floor is 256
        assertEquals(256, w.nextRows());
        WindowSizer small = new WindowSizer(16, 1 << 20, 1L << 20); // 1 MiB of Arrow memory
        small.observe(16, 16, 16 * 1024); // 1 token and 1 KiB a row: a quarter of 1 MiB holds 256 rows
        assertEquals(256, small.nextRows());
        assertThrows(IllegalArgumentException.class, () -> new WindowSizer(0, 0, 1));
    }
}
