package dev.scorch.jobs.score;

/** What a score run did, printed as its final line (in local mode the driver's peak RSS is the executor's too). */
public record ScoreSummary(
        long rows,
        long tokens,
        long errors,
        long batches,
        double seconds,
        double engineSeconds,
        double partitionSeconds,
        double paddingRatio,
        String modelLabel,
        String weights,
        long skippedByResume,
        long driverPeakRssBytes) {

    /** End to end: tokens over the job's seconds (checkpoint checks, input, JIT warm-up, scoring, output). */
    public double tokensPerSecond() {
        return seconds == 0 ? 0 : tokens / seconds;
    }

    /** The engine alone, in this job: tokens over the seconds its batches took, summed over tasks (one engine's rate). */
    public double engineTokensPerSecond() {
        return engineSeconds == 0 ? 0 : tokens / engineSeconds;
    }

    /** The engine's share of the partitions' streaming time, summed over tasks (a GPU task: how busy its GPU was). */
    public double engineBusy() {
        return partitionSeconds == 0 ? 0 : engineSeconds / partitionSeconds;
    }

    public String line() {
        return String.format(
                "scored %,d rows (%,d errors, %,d skipped as already done), %,d tokens in %,d batches, %.1f s, "
                        + "%.1f tokens/s, engine %.1f s summed over tasks (%.1f tokens/s), engine busy %.1f%% of the"
                        + " partitions' %.1f s, padding %.1f%%, model %s, weights %s, "
                        + "driver peak RSS %.0f MiB",
                rows,
                errors,
                skippedByResume,
                tokens,
                batches,
                seconds,
                tokensPerSecond(),
                engineSeconds,
                engineTokensPerSecond(),
                100 * engineBusy(),
                partitionSeconds,
                100 * paddingRatio,
                modelLabel,
                weights,
                driverPeakRssBytes / 1048576.0);
    }
}
