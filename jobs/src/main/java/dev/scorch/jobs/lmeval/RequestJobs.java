package dev.scorch.jobs.lmeval;

import static org.apache.spark.sql.functions.col;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.lmeval.task.OutputType;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Every task's loglikelihood requests (multiple_choice choices, rolling windows) through one score job
 * ({@link GenerateUntil} runs the generate_until ones). The score job shares prefixes: a context common to several
 * requests is computed once per task.
 */
final class RequestJobs {
    private RequestJobs() {}

    static void score(SparkSession spark, LmEvalSpec spec, ScorchModel model, List<TaskPlan> plans) {
        List<Row> rows = new ArrayList<>();
        Map<String, PlannedRequest> byId = new HashMap<>();
        Map<String, LmTokens.Scored> seqById = new HashMap<>();
        for (TaskPlan p : plans) {
            int[][] firstTwo = firstTwoContexts(p);
            for (List<PlannedRequest> doc : p.requests) {
                for (PlannedRequest q : doc) {
                    for (LmTokens.Scored s : q.sequences) {
                        String id = String.valueOf(rows.size());
                        int from = s.tokens().length - s.continuationLength();
                        int shared = q.request.type() == OutputType.LOGLIKELIHOOD_ROLLING
                                ? 0
                                : sharedPrefix(s.tokens(), from - 1, firstTwo);
                        rows.add(RowFactory.create(id, EvalReport.longs(s.tokens()), from, shared, rows.size()));
                        byId.put(id, q);
                        seqById.put(id, s);
                    }
                    q.ll = 0;
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false))
                .add("score_from", DataTypes.IntegerType)
                .add("shared_prefix", DataTypes.IntegerType)
                .add("order", DataTypes.IntegerType);
        ScoreParams params = new ScoreParams()
                .setScoreFromCol("score_from")
                .setSharedPrefixCol("shared_prefix")
                .setTopK(1)
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setThreads(spec.threads())
                .setBackend(BackendMode.CPU)
                .setSharePrefixes(true);
        // Contiguous ranges of the rows in the order they were made: a document's choices and a task's few-shot
        // documents stay in one partition, where their shared context is computed once.
        Dataset<Row> in = spark.createDataFrame(rows, schema)
                .repartitionByRange(Math.max(1, Math.min(spec.partitions(), rows.size())), col("order"));
        List<Row> out = model.score(in, params)
                .select("id", "token_logprobs", "top_logprobs", "error")
                .collectAsList();
        if (out.size() != rows.size()) {
            throw new IllegalStateException("the score job returned " + out.size() + " rows for " + rows.size());
        }
        for (Row r : out) {
            String id = r.getString(0);
            PlannedRequest q = byId.get(id);
            LmTokens.Scored s = seqById.get(id);
            if (!r.isNullAt(3)) {
                throw new IllegalStateException("lm-eval task '" + q.request.task() + "' document " + q.request.docId()
                        + ": the score job failed: " + r.getString(3));
            }
            List<Object> lps = r.getList(1);
            List<Object> tops = r.getList(2);
            int[] t = s.tokens();
            for (int k = t.length - s.continuationLength(); k < t.length; k++) {
                q.ll += ((Number) lps.get(k)).doubleValue();
                @SuppressWarnings("unchecked")
                List<Row> top = (List<Row>)
                        (Object) scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<Row>) tops.get(k));
                if (top.isEmpty() || ((Number) top.get(0).get(0)).intValue() != t[k]) {
                    q.greedy = false;
                }
            }
        }
    }

    /**
     * The contexts (the tokens before the one that predicts the continuation) of the task's first two documents' first
     * loglikelihood requests; null when the task has fewer.
     */
    static int[][] firstTwoContexts(TaskPlan p) {
        List<int[]> out = new ArrayList<>(2);
        for (List<PlannedRequest> doc : p.requests) {
            for (PlannedRequest q : doc) {
                if (q.request.type() != OutputType.LOGLIKELIHOOD_ROLLING && !q.sequences.isEmpty()) {
                    LmTokens.Scored s = q.sequences.get(0);
                    out.add(Arrays.copyOf(s.tokens(), s.tokens().length - s.continuationLength() - 1));
                    break;
                }
            }
            if (out.size() == 2) {
                return out.toArray(int[][]::new);
            }
        }
        return null;
    }

    /**
     * Where the prefix a task's documents share ends in a request's tokens, for the score job to compute it once: the
     * tokens its context has in common with the first document's and the first two documents have in common (a
     * description and first_n few-shot examples, a fixed system prompt). 0, none, where that is less than half of the
     * context (the random sampler's examples differ per document: their contexts share little, and a context whose own
     * part is long is scored fastest whole). The task's first two documents fix it, whatever the batch or the limit
     * past two.
     */
    static int sharedPrefix(int[] tokens, int contextEnd, int[][] firstTwo) {
        if (firstTwo == null || contextEnd <= 0) {
            return 0;
        }
        int common = commonLength(firstTwo[0], firstTwo[1], firstTwo[0].length);
        int p = commonLength(tokens, firstTwo[0], Math.min(common, contextEnd));
        return 2 * p >= contextEnd && p < contextEnd ? p : 0;
    }

    private static int commonLength(int[] a, int[] b, int max) {
        int n = Math.min(max, Math.min(a.length, b.length));
        int i = 0;
        while (i < n && a[i] == b[i]) {
            i++;
        }
        return i;
    }
}
