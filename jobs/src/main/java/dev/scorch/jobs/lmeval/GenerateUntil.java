package dev.scorch.jobs.lmeval;

import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.jobs.lmeval.task.LmRequest;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
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
 * Every task's generate_until requests through one generate job, each request answered {@code repeats} times (a
 * request planned with repeats has that many {@link PlannedRequest}s, lm-eval's cloned instances). Greedy requests are
 * generated once and the text repeated (greedy decoding gives the same text each time). Sampled ones ({@link
 * HfSampling}) are one row per repeat, each with its own seed, derived from the run's torch seed (the third --seed
 * value), the task, the document, the request and the repeat: a run is reproducible with the same seed, independent of
 * partitioning and of the other tasks in the run. lm-eval's own draws come from torch's random stream, which no other
 * sampler reproduces. A torch seed of None draws a fresh seed per run, as lm-eval leaves torch unseeded.
 */
final class GenerateUntil {
    private GenerateUntil() {}

    static void run(SparkSession spark, LmEvalSpec spec, ScorchModel model, List<TaskPlan> plans, LmTokens tokens) {
        long runSeed = runSeed(spec);
        List<Row> rows = new ArrayList<>();
        Map<String, PlannedRequest> byId = new HashMap<>();
        Map<PlannedRequest, List<PlannedRequest>> copies = new IdentityHashMap<>(); // greedy: text shared by repeats
        for (TaskPlan p : plans) {
            HfSampling s = p.sampling;
            for (List<PlannedRequest> doc : p.requests) {
                Map<LmRequest, PlannedRequest> first = new IdentityHashMap<>();
                Map<LmRequest, Integer> repeat = new IdentityHashMap<>();
                for (PlannedRequest q : doc) {
                    if (q.prompt == null) {
                        continue;
                    }
                    int k = repeat.merge(q.request, 1, Integer::sum) - 1;
                    if (!s.sample() && k > 0) {
                        copies.get(first.get(q.request)).add(q);
                        continue;
                    }
                    first.putIfAbsent(q.request, q);
                    copies.put(q, new ArrayList<>());
                    String id = String.valueOf(rows.size());
                    rows.add(RowFactory.create(
                            id,
                            EvalReport.longs(q.prompt),
                            q.maxGenToks,
                            q.until == null ? List.of() : q.until,
                            s.sample() ? s.temperature() : 0.0,
                            s.sample() ? (Object) s.topK() : null,
                            s.sample() ? (Object) s.topP() : null,
                            s.sample() ? (Object) rowSeed(runSeed, q.request, k) : null));
                    byId.put(id, q);
                }
            }
        }
        if (rows.isEmpty()) {
            return;
        }
        StructType schema = new StructType()
                .add("id", DataTypes.StringType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false))
                .add("max_new_tokens", DataTypes.IntegerType)
                .add("stop", new ArrayType(DataTypes.StringType, false))
                .add("temperature", DataTypes.DoubleType)
                .add("top_k", DataTypes.IntegerType, true)
                .add("top_p", DataTypes.DoubleType, true)
                .add("seed", DataTypes.LongType, true);
        GenerateParams params = EvalJob.greedyRows(spec.maxBatchTokens(), spec.threads());
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        List<Row> out = model.generate(in, params)
                .select("id", "completion_token_ids", "error")
                .collectAsList();
        if (out.size() != rows.size()) {
            throw new IllegalStateException("the generate job returned " + out.size() + " rows for " + rows.size());
        }
        for (Row r : out) {
            PlannedRequest q = byId.get(r.getString(0));
            if (!r.isNullAt(2)) {
                throw new IllegalStateException("lm-eval task '" + q.request.task() + "' document " + q.request.docId()
                        + ": the generate job failed: " + r.getString(2));
            }
            List<Object> ids = r.getList(1);
            int[] gen = new int[ids.size()];
            for (int k = 0; k < gen.length; k++) {
                gen[k] = ((Number) ids.get(k)).intValue();
            }
            q.text = tokens.completion(gen, q.until);
            for (PlannedRequest c : copies.get(q)) {
                c.text = q.text;
            }
        }
    }

    /** The seed sampled rows derive theirs from: the torch seed, or a fresh one when it is None. */
    static long runSeed(LmEvalSpec spec) {
        Long torch = spec.seeds().size() > 2 ? spec.seeds().get(2) : null;
        return torch != null ? torch : new SecureRandom().nextLong();
    }

    /** A sampled row's seed: the first 8 bytes of SHA-256 over (run seed, task, document, request, repeat). */
    static long rowSeed(long runSeed, LmRequest r, int repeat) {
        String key = runSeed + "\n" + r.task() + "\n" + r.docId() + "\n" + r.index() + "\n" + repeat;
        try {
            byte[] h = MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
            return ByteBuffer.wrap(h).getLong();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
