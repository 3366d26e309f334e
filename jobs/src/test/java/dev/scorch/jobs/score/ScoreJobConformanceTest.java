package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The conformance checkpoint scored through Spark (local[2], ScoreJob.run) equals the float64 reference's
 * next-token log-probs within 1e-4 at every position of the 12 golden prompts.
 */
class ScoreJobConformanceTest {
    static final double TOL = 1e-4;

    @TempDir
    Path tmp;

    @Test
    void sparkScoresMatchGolden() {
        List<long[]> prompts = SparkTests.goldenPrompts();
        Path in = SparkTests.goldenInput(tmp);
        Path out = tmp.resolve("out");

        ScoreSummary summary = SparkTests.spec(SparkTests.conformanceModel(), in, out)
                .partitions(2)
                .maxBatchTokens(256)
                .run();
        assertEquals(prompts.size(), summary.rows());
        assertEquals(0, summary.errors());
        long tokens = prompts.stream().mapToLong(p -> p.length).sum();
        assertEquals(tokens, summary.tokens(), "every input token goes through the engine once");
        // Two tasks at most side by side in local[2]: their engine seconds sum to more than nothing and at most twice
        // the job's.
        assertTrue(summary.engineSeconds() > 0 && summary.engineSeconds() <= 2 * summary.seconds(), summary.line());
        // The partitions' streaming time holds their engine time: the engine's share of it is a fraction, printed.
        assertTrue(
                summary.partitionSeconds() >= summary.engineSeconds()
                        && summary.partitionSeconds() <= 2 * summary.seconds(),
                summary.line());
        assertTrue(summary.engineBusy() > 0 && summary.engineBusy() <= 1, summary.line());
        assertTrue(
                summary.line()
                        .contains(String.format("engine busy %.1f%% of the partitions'", 100 * summary.engineBusy())),
                summary.line());
        assertTrue(summary.modelLabel().startsWith("model@"), summary.modelLabel());

        Map<String, Scored> rows = SparkTests.readOutput(out, "parquet");
        assertEquals(prompts.size(), rows.size());
        JsonNode golden = SparkTests.golden().get("prompts");
        double maxDiff = 0;
        for (int i = 0; i < prompts.size(); i++) {
            Scored s = rows.get(String.valueOf(i));
            assertNotNull(s, "row " + i);
            assertNull(s.error(), "row " + i);
            long[] t = prompts.get(i);
            assertEquals(t.length, s.numTokens());
            for (int k = 0; k < t.length; k++) {
                assertEquals(t[k], (long) s.tokenIds().get(k), "row " + i + " token " + k);
            }
            List<Float> lps = s.tokenLogprobs();
            assertEquals(t.length, lps.size());
            assertNull(lps.get(0), "the first token has no log-prob");
            JsonNode g = golden.get(i).get("next_token_logprobs");
            assertEquals(t.length - 1, g.size());
            double sum = 0;
            for (int k = 0; k < g.size(); k++) {
                Float got = lps.get(k + 1);
                assertNotNull(got, "row " + i + " position " + (k + 1));
                double d = Math.abs(got - g.get(k).asDouble());
                maxDiff = Math.max(maxDiff, d);
                assertTrue(
                        d <= TOL,
                        "row " + i + " position " + (k + 1) + ": " + got + " vs golden "
                                + g.get(k).asDouble());
                sum += g.get(k).asDouble();
            }
            assertEquals(sum, s.sum(), TOL * Math.max(1, g.size()), "row " + i + " sum_logprob");
            if (t.length == 1) {
                assertEquals(0.0, s.sum());
                assertNull(s.mean(), "one token: nothing scored, no mean");
                assertNull(s.perplexity(), "one token: nothing scored, no perplexity");
            } else {
                assertEquals(s.sum() / (t.length - 1), s.mean(), 1e-12);
                assertEquals(Math.exp(-s.mean()), s.perplexity(), 1e-9 * s.perplexity());
            }
            assertEquals(summary.modelLabel(), s.model());
        }
        System.out.printf("spark conformance: max |dlogprob| %.3g over %d prompts%n", maxDiff, prompts.size());
    }

    /** --top-k and --logits last through Spark: the last position's logits and each position's best token match golden. */
    @Test
    void topKAndLastLogitsMatchGolden() {
        List<long[]> prompts = SparkTests.goldenPrompts();
        Path in = SparkTests.goldenInput(tmp);
        Path out = tmp.resolve("out-topk");
        SparkTests.spec(SparkTests.conformanceModel(), in, out)
                .topK(3)
                .logits(LogitsMode.LAST)
                .partitions(2)
                .run();

        Map<Long, Row> rows = new TreeMap<>();
        for (Row r : SparkTests.spark().read().parquet(out.toString()).collectAsList()) {
            rows.put(r.<Long>getAs("id"), r);
        }
        assertEquals(prompts.size(), rows.size());
        JsonNode golden = SparkTests.golden().get("prompts");
        for (int i = 0; i < prompts.size(); i++) {
            Row r = rows.get((long) i);
            JsonNode g = golden.get(i);
            int n = prompts.get(i).length;
            List<Object> logits = r.getList(r.fieldIndex("logits"));
            assertEquals(1, logits.size(), "--logits last: one row of logits");
            List<Float> last = floats(logits.get(0));
            JsonNode gl = g.get("last_logits");
            assertEquals(gl.size(), last.size(), "a vocab-wide row");
            for (int v = 0; v < gl.size(); v++) {
                assertEquals(gl.get(v).asDouble(), last.get(v), TOL, "row " + i + " last logit " + v);
            }
            List<Object> top = r.getList(r.fieldIndex("top_logprobs"));
            List<Object> lps = r.getList(r.fieldIndex("token_logprobs"));
            assertEquals(n, top.size());
            assertNull(top.get(0), "nothing predicts the first token");
            for (int k = 1; k < n; k++) {
                List<Object> entries =
                        scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<Object>) top.get(k));
                assertEquals(3, entries.size(), "row " + i + " position " + k);
                Row best = (Row) entries.get(0);
                assertEquals(
                        g.get("argmax").get(k - 1).asInt(),
                        best.getInt(0),
                        "row " + i + ": best token at position " + k);
                float tokenLp = ((Number) lps.get(k)).floatValue();
                for (int j = 0; j < 3; j++) {
                    Row e = (Row) entries.get(j);
                    if (j > 0) {
                        assertTrue(
                                e.getFloat(1) <= ((Row) entries.get(j - 1)).getFloat(1),
                                "top-k sorted, row " + i + " position " + k);
                    }
                    if (e.getInt(0) == prompts.get(i)[k]) {
                        assertEquals(tokenLp, e.getFloat(1), "the token's own log-prob, row " + i + " position " + k);
                    }
                }
                assertTrue(
                        tokenLp <= ((Row) entries.get(0)).getFloat(1),
                        "no token beats the best, row " + i + " position " + k);
            }
        }
    }

    static List<Float> floats(Object seq) {
        List<Float> out = new ArrayList<>();
        for (Object o : scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<?>) seq)) {
            out.add(((Number) o).floatValue());
        }
        return out;
    }
}
