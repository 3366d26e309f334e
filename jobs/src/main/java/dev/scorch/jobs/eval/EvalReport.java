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

    /** The run's summary and, with a comparison, the comparison and its verdict, as the CLI prints them. */
    public void print(java.io.PrintStream out) {
        out.println("run " + runId + " (" + String.format("%.1f", seconds) + " s):");
        summary.forEach(out::println);
        if (!comparison.isEmpty()) {
            out.println();
            comparison.forEach(out::println);
            out.println(
                    regressions.isEmpty()
                            ? "no metric dropped by more than its tolerance"
                            : regressions.size() + " metric(s) dropped by more than their tolerance");
        }
    }

    /** Token ids as the score and generate jobs' bigint arrays take them. */
    public static List<Long> longs(int[] ids) {
        List<Long> out = new java.util.ArrayList<>(ids.length);
        for (int id : ids) {
            out.add((long) id);
        }
        return out;
    }
}
