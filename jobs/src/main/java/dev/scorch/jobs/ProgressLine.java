package dev.scorch.jobs;

import dev.scorch.udfs.progress.LocalProgress;
import org.apache.spark.sql.SparkSession;

/**
 * In local mode on a terminal, a live console line (rows done of all, errors, tokens/s, ETA) redrawn every
 * second from the tasks' live counters ({@link LocalProgress}: the driver shares their JVM). Elsewhere it prints
 * nothing: the Spark UI shows the job's accumulators.
 */
public final class ProgressLine implements AutoCloseable {
  private final Thread thread;

  private ProgressLine(Thread thread) {
    this.thread = thread;
  }

  /** totalRows is asked for only when the line is shown (counting the input costs a pass over it). */
  public static ProgressLine start(SparkSession spark, java.util.function.LongSupplier totalRows) {
    boolean local = spark.sparkContext().master().startsWith("local");
    if (!local || System.console() == null) {
      return new ProgressLine(null);
    }
    long total = totalRows.getAsLong();
    long t0 = System.nanoTime();
    long rows0 = LocalProgress.rows();
    long tokens0 = LocalProgress.tokens();
    long errors0 = LocalProgress.errors();
    Thread t = new Thread(() -> {
      try {
        while (!Thread.currentThread().isInterrupted()) {
          Thread.sleep(1000);
          double secs = (System.nanoTime() - t0) / 1e9;
          long rows = LocalProgress.rows() - rows0;
          long eta = rows == 0 ? -1 : Math.round(secs * (total - rows) / rows);
          System.err.printf("\rscorch: %,d / %,d rows, %,d errors, %.1f tokens/s, ETA %s   ", rows, total, LocalProgress.errors() - errors0,
              (LocalProgress.tokens() - tokens0) / secs, eta < 0 ? "?" : String.format("%d:%02d", eta / 60, eta % 60));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }, "scorch-progress");
    t.setDaemon(true);
    t.start();
    return new ProgressLine(t);
  }

  @Override
  public void close() {
    if (thread != null) {
      thread.interrupt();
      System.err.println();
    }
  }
}
