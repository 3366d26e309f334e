package dev.scorch.jobs.score;

import dev.scorch.udfs.score.ScoreMetrics;
import org.apache.spark.sql.SparkSession;

/**
 * In local mode on a terminal, a live console line (rows, errors, tokens/s) redrawn every second from the
 * job's accumulators. Elsewhere it prints nothing: the Spark UI shows the same accumulators.
 */
final class ProgressLine implements AutoCloseable {
  private final Thread thread;

  private ProgressLine(Thread thread) {
    this.thread = thread;
  }

  static ProgressLine start(SparkSession spark, ScoreMetrics m) {
    boolean local = spark.sparkContext().master().startsWith("local");
    if (!local || System.console() == null) {
      return new ProgressLine(null);
    }
    long t0 = System.nanoTime();
    Thread t = new Thread(() -> {
      try {
        while (!Thread.currentThread().isInterrupted()) {
          Thread.sleep(1000);
          double secs = (System.nanoTime() - t0) / 1e9;
          System.err.printf("\rscorch: %,d rows, %,d errors, %,d tokens, %.1f tokens/s   ", m.rows().value(), m.errors().value(),
              m.tokens().value(), m.tokens().value() / secs);
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
