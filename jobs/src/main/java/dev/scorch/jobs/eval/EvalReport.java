package dev.scorch.jobs.eval;

import java.util.List;

/**
 * What an eval run produced: its summary rows and, with --compare-to, the comparison.
 *
 * @param regressions comparison lines whose drop is over the tolerance (empty: none, or no comparison)
 */
public record EvalReport(
        String runId, List<String> summary, List<String> comparison, List<String> regressions, double seconds) {

    /** The process exit code: 3 when a metric dropped by more than the suite allows, else 0. */
    public int exitCode() {
        return regressions.isEmpty() ? 0 : 3;
    }
}
