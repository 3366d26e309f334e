package dev.scorch.jobs.score;

/** What a score run did, printed as its final line (in local mode the driver's peak RSS is the executor's too). */
public record ScoreSummary(long rows, long tokens, long errors, long batches, double seconds, double paddingRatio, String modelLabel,
    String weights, long skippedByResume, long driverPeakRssBytes) {

  public double tokensPerSecond() {
    return seconds == 0 ? 0 : tokens / seconds;
  }

  public String line() {
    return String.format("scored %,d rows (%,d errors, %,d skipped as already done), %,d tokens in %,d batches, %.1f s, "
            + "%.1f tokens/s, padding %.1f%%, model %s, weights %s, driver peak RSS %.0f MiB",
        rows, errors, skippedByResume, tokens, batches, seconds, tokensPerSecond(), 100 * paddingRatio, modelLabel, weights,
        driverPeakRssBytes / 1048576.0);
  }
}
