package dev.scorch.jobs.eval;

import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * One task of a run: the rows it sends to the score job and the generate job (ids prefixed by the task's name),
 * then, from their results, its per-example rows and its metrics.
 */
public interface TaskRun {
    EvalSuite.Task task();

    default List<ScoreRow> scoreRows() {
        return List.of();
    }

    default List<GenerateRow> generateRows() {
        return List.of();
    }

    Result finish(Map<String, Scored> scored, Map<String, Generated> generated);

    /** results.get(id), or a failure naming the id: the jobs return one row per row sent, so a gap is a bug. */
    static <T> T resultOf(Map<String, T> results, String id) {
        T r = results.get(id);
        if (r == null) {
            throw new IllegalStateException(
                    "no result row for '" + id + "' among " + results.size() + " rows returned");
        }
        return r;
    }

    /** A token sequence to score; every token after the first gets log p(token | tokens before). */
    record ScoreRow(String id, int[] tokens) {}

    /** The score job's answer: token_logprobs (index 0 is null, kept as NaN), or its error. */
    record Scored(double[] tokenLogprobs, String error) {}

    /** A prompt to continue greedily. */
    record GenerateRow(String id, int[] prompt, int maxNewTokens, List<String> stop) {}

    /** The generate job's answer. */
    record Generated(String completion, String finishReason, String error) {}

    /** Per-example rows (schema first) and the task's metrics. */
    record Result(StructType exampleSchema, List<Row> examples, List<Metric> metrics) {}

    /**
     * One figure of a task.
     *
     * @param higherIsBetter whether a rise is an improvement (accuracy) or a regression (perplexity)
     * @param n              examples the figure is over
     * @param errors         examples that failed and are left out of it
     */
    record Metric(
            String metric,
            double value,
            double stderr,
            String stderrMethod,
            long n,
            long errors,
            boolean higherIsBetter) {}
}
