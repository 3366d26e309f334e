package dev.scorch.jobs;

import dev.scorch.udfs.progress.LocalProgress;
import org.apache.spark.sql.SparkSession;

/**
 * In local mode on a terminal, a live console line (rows done of all, errors, tokens/s, ETA) redrawn every
 * second from the tasks' live counters ({@link LocalProgress}: the driver shares their JVM). Elsewhere it prints
 * nothing: the Spark UI shows the job's accumulators.
 *
 * <p>Whether stderr is a terminal: the system property {@code scorch.progress} when set (bin/scorch sets it from
 * {@code [[ -t 2 ]]}), else whether there is a console. From JDK 22 on there is a console even when the output is
 * piped, and the line would cost a counting pass over the input that nobody sees.
 */
public final class ProgressLine implements AutoCloseable {
    private final Thread thread;

    private ProgressLine(Thread thread) {
        this.thread = thread;
    }

    /** totalRows is asked for only when the line is shown (counting the input costs a pass over it). */
    public static ProgressLine start(SparkSession spark, java.util.function.LongSupplier totalRows) {
        if (!shown(spark.sparkContext().master(), System.getProperty("scorch.progress"), System.console() != null)) {
            return new ProgressLine(null);
        }
        long total = totalRows.getAsLong();
        long t0 = System.nanoTime();
        long rows0 = LocalProgress.rows();
        long tokens0 = LocalProgress.tokens();
        long errors0 = LocalProgress.errors();
        Thread t = new Thread(
                () -> {
                    try {
                        while (!Thread.currentThread().isInterrupted()) {
                            Thread.sleep(1000);
                            double secs = (System.nanoTime() - t0) / 1e9;
                            long rows = LocalProgress.rows() - rows0;
                            long eta = rows == 0 ? -1 : Math.round(secs * (total - rows) / rows);
                            System.err.printf(
                                    "\rscorch: %,d / %,d rows, %,d errors, %.1f tokens/s, ETA %s   ",
                                    rows,
                                    total,
                                    LocalProgress.errors() - errors0,
                                    (LocalProgress.tokens() - tokens0) / secs,
                                    eta < 0 ? "?" : String.format("%d:%02d", eta / 60, eta % 60));
                        }
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                },
                "scorch-progress");
        t.setDaemon(true);
        t.start();
        return new ProgressLine(t);
    }

    /** Whether the line is shown: in local mode, on a terminal (the scorch.progress property when set, else a console). */
    static boolean shown(String master, String progressProperty, boolean console) {
        boolean terminal = progressProperty != null ? Boolean.parseBoolean(progressProperty) : console;
        return master.startsWith("local") && terminal;
    }

    @Override
    public void close() {
        if (thread != null) {
            thread.interrupt();
            System.err.println();
        }
    }
}
