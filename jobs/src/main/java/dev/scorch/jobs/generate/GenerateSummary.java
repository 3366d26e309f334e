package dev.scorch.jobs.generate;

/** What a generate run did, printed as its final line (in local mode the driver's peak RSS is the executor's too). */
public record GenerateSummary(
        long rows,
        long completionTokens,
        long errors,
        double seconds,
        String modelLabel,
        String weights,
        long skippedByResume,
        long driverPeakRssBytes,
        long cacheBytesPerToken,
        long cacheBudgetBytes) {

    public double tokensPerSecond() {
        return seconds == 0 ? 0 : completionTokens / seconds;
    }

    public String line() {
        return String.format(
                "generated for %,d rows (%,d errors, %,d skipped as already done), %,d completion tokens, %.1f s, "
                        + "%.1f tokens/s, model %s, weights %s, KV cache %,d bytes/token (budget %.0f MiB = %,d tokens per task), driver peak RSS %.0f MiB",
                rows,
                errors,
                skippedByResume,
                completionTokens,
                seconds,
                tokensPerSecond(),
                modelLabel,
                weights,
                cacheBytesPerToken,
                cacheBudgetBytes / 1048576.0,
                cacheBudgetBytes / cacheBytesPerToken,
                driverPeakRssBytes / 1048576.0);
    }
}
