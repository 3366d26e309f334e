package dev.scorch.udfs.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ScorchModel.score with a score-from column (a token_ids row scored from a continuation's start) and shared prefixes
 * (a few-shot prompt and each document's context computed once per task), on the demo model in local[2].
 */
class ScorchModelSharedPrefixTest {
    static final StructType INPUT = new StructType()
            .add("key", DataTypes.IntegerType)
            .add("token_ids", new ArrayType(DataTypes.IntegerType, false))
            .add("from", DataTypes.IntegerType)
            .add("prompt_len", DataTypes.IntegerType);

    static SparkSession spark;
    static ScorchModel model;

    @BeforeAll
    static void load() {
        spark = ApiTests.spark();
        model = ScorchModel.load(spark, ApiTests.demoModel().toString());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    /** Three documents after one 40-token prompt, three choices each, then two bad rows. */
    static List<Row> rows() {
        Random r = new Random(5);
        List<Integer> prompt = tokens(r, 40);
        List<Row> out = new ArrayList<>();
        for (int d = 0; d < 3; d++) {
            List<Integer> context = new ArrayList<>(prompt);
            context.addAll(tokens(r, 20 + 7 * d));
            for (int c = 0; c < 3; c++) {
                List<Integer> all = new ArrayList<>(context);
                all.addAll(tokens(r, 1 + c));
                out.add(RowFactory.create(out.size(), all, context.size(), prompt.size()));
            }
        }
        out.add(RowFactory.create(out.size(), List.of(3, 4, 5), 4, null)); // past the row's end
        out.add(RowFactory.create(out.size(), List.of(3, 4, 5), 2, 9)); // shared prefix past the row's end
        return out;
    }

    static List<Integer> tokens(Random r, int n) {
        List<Integer> t = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            t.add(1 + r.nextInt(500));
        }
        return t;
    }

    static List<Row> score(ScoreParams p) {
        Dataset<Row> df = spark.createDataFrame(rows(), INPUT).repartition(2);
        return model.score(df, p.setScoreFromCol("from")).orderBy("key").collectAsList();
    }

    @Test
    void scoreFromScoresTheContinuationAndSharedPrefixesAgreeWithin1e4() {
        List<Row> plain = score(new ScoreParams().setTopK(1));
        List<Row> shared =
                score(new ScoreParams().setTopK(1).setSharePrefixes(true).setSharedPrefixCol("prompt_len"));
        List<Row> whole = model.score(spark.createDataFrame(rows(), INPUT).repartition(2))
                .orderBy("key")
                .collectAsList();
        double worst = 0;
        for (int i = 0; i < 9; i++) {
            Row p = plain.get(i);
            Row s = shared.get(i);
            Row w = whole.get(i);
            assertNull(p.getAs("error"));
            assertNull(s.getAs("error"));
            int from = rows().get(i).getInt(2);
            List<Object> lp = p.getList(p.fieldIndex("token_logprobs"));
            List<Object> ls = s.getList(s.fieldIndex("token_logprobs"));
            List<Object> lw = w.getList(w.fieldIndex("token_logprobs"));
            for (int k = 0; k < lp.size(); k++) {
                if (k < from) {
                    assertNull(lp.get(k), "row " + i + " position " + k + " is before score_from");
                    assertNull(ls.get(k));
                } else {
                    // plain scoring computes every position as without score_from: the same bits
                    assertEquals(lw.get(k), lp.get(k), "row " + i + " position " + k);
                    worst = Math.max(worst, Math.abs((Float) lp.get(k) - (Float) ls.get(k)));
                }
            }
            assertEquals((double) p.getAs("sum_logprob"), (double) s.getAs("sum_logprob"), 1e-4 * lp.size());
            assertNotEquals(
                    (double) w.getAs("sum_logprob"), (double) p.getAs("sum_logprob"), "only the continuation counts");
        }
        assertTrue(worst <= 1e-4, "largest difference " + worst);
        assertTrue(worst > 0, "the shared path ran (it rounds differently)");
        ScorchModelTest.assertError(plain.get(9), "score_from 4 outside [1, 3], the row's tokens");
        ScorchModelTest.assertError(shared.get(10), "shared_prefix 9 outside [0, 3], the row's tokens");
    }

    /** A row's shared-prefix scores are the same bits however the rows are partitioned and batched. */
    @Test
    void sharedScoresDoNotDependOnPartitioningOrBatching() {
        ScoreParams a = new ScoreParams().setSharePrefixes(true).setSharedPrefixCol("prompt_len");
        ScoreParams b = new ScoreParams()
                .setSharePrefixes(true)
                .setSharedPrefixCol("prompt_len")
                .setMaxBatchTokens(50)
                .setWindowRows(2);
        List<Row> x = score(a);
        Dataset<Row> one = spark.createDataFrame(rows(), INPUT).coalesce(1);
        List<Row> y = model.score(one, b.setScoreFromCol("from")).orderBy("key").collectAsList();
        for (int i = 0; i < 9; i++) {
            assertEquals(
                    x.get(i).getList(x.get(i).fieldIndex("token_logprobs")),
                    y.get(i).getList(y.get(i).fieldIndex("token_logprobs")),
                    "row " + i);
        }
    }
}
