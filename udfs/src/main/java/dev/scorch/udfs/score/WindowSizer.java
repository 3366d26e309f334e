package dev.scorch.udfs.score;

/**
 * How many rows a score task's next window reads. A window is scored as sorted, token-budget batches, and only its
 * last batch may be short; a window of fewer tokens than the batch budget leaves every forward short of it, and a
 * GPU waits while the task writes a window's output rows (the next window is read while this one is scored). So a task that asks for targetTokens a
 * window reads at least minRows rows and, once it has seen rows, as many as the rows so far say hold targetTokens
 * tokens; but no more than a quarter of its Arrow memory holds at the bytes per row seen so far (the input and output
 * buffers, each of which may double as it grows). A window read ahead asks while the one before it is scored (another
 * thread), so the two calls are synchronized. Which rows share a batch never changes a row's scores.
 */
final class WindowSizer {
    private final int minRows;
    private final long targetTokens;
    private final long arrowMemoryBytes;
    private long rows;
    private long tokens;
    private long arrowBytesPerRow;

    /**
     * @param minRows           the window rows asked for (the floor)
     * @param targetTokens      tokens a window should hold; 0 for windows of minRows rows
     * @param arrowMemoryBytes  the task's Arrow memory cap
     */
    WindowSizer(int minRows, long targetTokens, long arrowMemoryBytes) {
        if (minRows < 1 || targetTokens < 0 || arrowMemoryBytes < 1) {
            throw new IllegalArgumentException(
                    "window of " + minRows + " rows, " + targetTokens + " tokens, " + arrowMemoryBytes + " bytes");
        }
        this.minRows = minRows;
        this.targetTokens = targetTokens;
        this.arrowMemoryBytes = arrowMemoryBytes;
    }

    /** The rows of the next window. */
    synchronized int nextRows() {
        if (targetTokens == 0 || rows == 0 || tokens == 0) {
            return minRows;
        }
        double tokensPerRow = (double) tokens / rows;
        long want = (long) Math.ceil(targetTokens / tokensPerRow);
        long fit = arrowBytesPerRow == 0 ? Long.MAX_VALUE : arrowMemoryBytes / 4 / arrowBytesPerRow;
        return (int) Math.max(minRows, Math.min(Integer.MAX_VALUE - 8, Math.min(want, fit)));
    }

    /** A window read n rows holding windowTokens tokens, its Arrow buffers arrowBytes at its end. */
    synchronized void observe(int n, long windowTokens, long arrowBytes) {
        if (n <= 0) {
            return;
        }
        rows += n;
        tokens += windowTokens;
        arrowBytesPerRow = Math.max(arrowBytesPerRow, (arrowBytes + n - 1) / n);
    }
}
