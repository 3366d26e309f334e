package dev.scorch.jobs.lmeval;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.jobs.eval.EvalJob;
import dev.scorch.jobs.eval.EvalReport;
import dev.scorch.udfs.api.GenerateParams;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.api.ScoreParams;
import java.util.ArrayList;
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

/** Every task's requests through one score job (loglikelihoods, rolling windows) and one generate job (generate_until). */
final class RequestJobs {
    private RequestJobs() {}

    static void score(SparkSession spark, LmEvalSpec spec, ScorchModel model, List<TaskPlan> plans) {
        List<Row> rows = new ArrayList<>();
        Map<String, PlannedRequest> byId = new HashMap<>();
        Map<String, LmTokens.Scored> seqById = new HashMap<>();
        for (TaskPlan p : plans) {
            for (List<PlannedRequest> doc : p.requests) {
                for (PlannedRequest q : doc) {
                    for (LmTokens.Scored s : q.sequences) {
                        String id = String.valueOf(rows.size());
                        rows.add(RowFactory.create(id, EvalReport.longs(s.tokens())));
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
                .add("token_ids", new ArrayType(DataTypes.LongType, false));
        ScoreParams params = new ScoreParams()
                .setTopK(1)
                .setMaxBatchTokens(spec.maxBatchTokens())
                .setThreads(spec.threads())
                .setBackend(BackendMode.CPU);
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
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

    static void generate(
            SparkSession spark, LmEvalSpec spec, ScorchModel model, List<TaskPlan> plans, LmTokens tokens) {
        List<Row> rows = new ArrayList<>();
        Map<String, PlannedRequest> byId = new HashMap<>();
        for (TaskPlan p : plans) {
            for (List<PlannedRequest> doc : p.requests) {
                for (PlannedRequest q : doc) {
                    if (q.prompt != null) {
                        String id = String.valueOf(rows.size());
                        rows.add(RowFactory.create(
                                id,
                                EvalReport.longs(q.prompt),
                                q.maxGenToks,
                                q.until == null ? List.of() : q.until,
                                q.temperature));
                        byId.put(id, q);
                    }
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
                .add("temperature", DataTypes.DoubleType);
        GenerateParams params = EvalJob.greedyRows(spec.maxBatchTokens(), spec.threads());
        Dataset<Row> in = spark.createDataFrame(rows, schema).repartition(spec.partitions());
        for (Row r : model.generate(in, params)
                .select("id", "completion_token_ids", "error")
                .collectAsList()) {
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
        }
    }
}
