package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every kind of bad row yields exactly one output row with an error naming the problem and no scores,
 * while the good rows around it score exactly as they do alone. Input is Parquet with array&lt;int&gt; ids.
 */
class ScoreJobBadRowsTest {
    static final StructType INPUT = new StructType()
            .add("id", DataTypes.StringType, true)
            .add("token_ids", new ArrayType(DataTypes.IntegerType, true), true)
            .add("prompt", DataTypes.StringType, true);

    /** Golden prompts used as good rows: by golden index. */
    static final int[] GOOD = {1, 3, 6, 8, 11};

    @TempDir
    Path tmp;

    static List<Integer> list(long[] t) {
        List<Integer> out = new ArrayList<>(t.length);
        for (long v : t) {
            out.add((int) v);
        }
        return out;
    }

    static Path writeParquet(Path dir, List<Row> rows) {
        SparkTests.spark().createDataFrame(rows, INPUT).coalesce(1).write().parquet(dir.toString());
        return dir;
    }

    @Test
    void everyBadRowGetsOneErrorRowAndGoodRowsScoreAsAlone() {
        List<long[]> golden = SparkTests.goldenPrompts();
        List<Row> good = new ArrayList<>();
        for (int g : GOOD) {
            good.add(RowFactory.create("good-" + g, list(golden.get(g)), null));
        }
        List<Integer> tooLong = new ArrayList<>();
        for (int i = 0; i < 2049; i++) {
            tooLong.add(i % 500);
        }
        // id -> the words its error must contain
        Map<String, List<String>> bad = new LinkedHashMap<>();
        List<Row> rows = new ArrayList<>();
        rows.add(good.get(0));
        rows.add(RowFactory.create("null-ids", null, null));
        bad.put("null-ids", List.of("token_ids is null"));
        rows.add(good.get(1));
        rows.add(RowFactory.create("empty-ids", List.of(), null));
        bad.put("empty-ids", List.of("token_ids is empty"));
        rows.add(RowFactory.create("too-long", tooLong, null));
        bad.put("too-long", List.of("2049 tokens", "max_position_embeddings 2048"));
        rows.add(good.get(2));
        rows.add(RowFactory.create("oov-high", List.of(5, 9, 512, 7), null));
        bad.put("oov-high", List.of("token id 512", "position 2", "vocabulary [0, 512)"));
        rows.add(RowFactory.create("oov-negative", List.of(5, -1), null));
        bad.put("oov-negative", List.of("token id -1", "position 1", "vocabulary"));
        rows.add(RowFactory.create("null-element", Arrays.asList(5, null, 7), null));
        bad.put("null-element", List.of("position 1", "null"));
        rows.add(RowFactory.create("text-only", null, "Hello, world"));
        bad.put("text-only", List.of("tokenizer"));
        rows.add(RowFactory.create("empty-prompt", null, ""));
        bad.put("empty-prompt", List.of("prompt is empty"));
        rows.add(good.get(3));
        rows.add(RowFactory.create(null, list(golden.get(2)), null)); // a good sequence without an id
        rows.add(good.get(4));

        Path in = writeParquet(tmp.resolve("mixed.parquet"), rows);
        Path out = tmp.resolve("out");
        ScoreSummary summary = SparkTests.spec(SparkTests.conformanceModel(), in, out)
                .partitions(3)
                .maxBatchTokens(128)
                .run();
        int badCount = bad.size() + 1; // + the row without an id
        assertEquals(rows.size(), summary.rows());
        assertEquals(badCount, summary.errors());

        Map<String, Scored> got = SparkTests.readOutput(out, "parquet");
        assertEquals(rows.size(), got.size(), "one output row per input row: " + got.keySet());

        for (Map.Entry<String, List<String>> e : bad.entrySet()) {
            Scored s = got.get(e.getKey());
            assertNotNull(s, "no output row for " + e.getKey());
            assertErrorRow(s, e.getKey(), e.getValue());
        }
        Scored noId = got.get("null");
        assertNotNull(noId, "no output row for the row without an id");
        assertNull(noId.id());
        assertErrorRow(noId, "row without id", List.of("id is null", ".parquet:"));

        // The good rows: correct (golden) and bit-identical to a run of the good rows alone.
        Path aloneIn = writeParquet(tmp.resolve("good.parquet"), good);
        Path aloneOut = tmp.resolve("good-out");
        SparkTests.spec(SparkTests.conformanceModel(), aloneIn, aloneOut)
                .partitions(1)
                .run();
        Map<String, Scored> alone = SparkTests.readOutput(aloneOut, "parquet");
        JsonNode gp = SparkTests.golden().get("prompts");
        for (int g : GOOD) {
            String id = "good-" + g;
            Scored s = got.get(id);
            assertNotNull(s, id);
            assertNull(s.error(), id);
            assertEquals(
                    alone.get(id).tokenLogprobs(),
                    s.tokenLogprobs(),
                    id + ": token log-probs differ from scoring it alone");
            assertEquals(alone.get(id).sum(), s.sum(), id + ": sum_logprob differs from scoring it alone");
            JsonNode lps = gp.get(g).get("next_token_logprobs");
            for (int k = 0; k < lps.size(); k++) {
                assertEquals(lps.get(k).asDouble(), s.tokenLogprobs().get(k + 1), 1e-4, id + " position " + (k + 1));
            }
        }
    }

    static void assertErrorRow(Scored s, String what, List<String> words) {
        assertNotNull(s.error(), what + ": no error");
        for (String w : words) {
            assertTrue(s.error().contains(w), what + ": error '" + s.error() + "' does not mention '" + w + "'");
        }
        assertNull(s.numTokens(), what + ": num_tokens");
        assertNull(s.tokenIds(), what + ": token_ids");
        assertNull(s.tokenLogprobs(), what + ": token_logprobs");
        assertNull(s.sum(), what + ": sum_logprob");
        assertNull(s.mean(), what + ": mean_logprob");
        assertNull(s.perplexity(), what + ": perplexity");
        assertNotNull(s.model(), what + ": model");
    }
}
