package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.TensorInfo;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint whose weights hold NaN: a row the NaN reaches gets an error naming the first non-finite score, never
 * NaN scores with a null error; the rows it does not reach score as usual. The NaN is one row of embed_tokens (token
 * {@link #POISON}), so it reaches a sequence from that token's position on (attention is causal): the log-prob of the
 * next token is the first one hit.
 */
public class ScoreJobNonFiniteTest {
    /** The embedding row made NaN. */
    public static final int POISON = 300;

    @TempDir
    static Path tmp;

    static Path model;

    @BeforeAll
    static void poisonedModel() throws IOException {
        model = tmp.resolve("nan-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 9901).write(model);
        nanEmbeddingRow(model, POISON);
    }

    /** Overwrites row token of the BF16 model.embed_tokens.weight in dir's shards with NaN. */
    public static void nanEmbeddingRow(Path dir, int token) throws IOException {
        TensorInfo t = Checkpoint.open(dir).info("model.embed_tokens.weight");
        assertEquals(DType.BF16, t.dtype());
        int hidden = Math.toIntExact(t.shape()[1]);
        ByteBuffer nan = ByteBuffer.allocate(2 * hidden).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < hidden; i++) {
            nan.putShort((short) 0x7fc0); // BF16 quiet NaN
        }
        nan.flip();
        try (FileChannel ch = FileChannel.open(t.file(), StandardOpenOption.WRITE)) {
            ch.write(nan, t.begin() + 2L * hidden * token);
        }
    }

    /** Random ids in [0, vocab) without POISON. */
    static long[] clean(Random r, int n) {
        long[] t = SparkTests.randomTokens(r, n, DemoPreset.TINY.vocabSize());
        for (int i = 0; i < n; i++) {
            if (t[i] == POISON) {
                t[i] = POISON + 1;
            }
        }
        return t;
    }

    @Test
    void rowsTheNanReachesGetAnErrorAndTheOthersScore() {
        Random r = new Random(11);
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            lines.add(SparkTests.row("good" + i, clean(r, 12 + 3 * i)));
        }
        long[] mid = clean(r, 20);
        mid[7] = POISON; // log-probs 0..7 are finite (t[7] = POISON is predicted from clean positions), 8 is the first
        // NaN
        lines.add(SparkTests.row("mid", mid));
        long[] first = clean(r, 10);
        first[0] = POISON;
        lines.add(SparkTests.row("first", first));
        long[] last = clean(r, 10);
        last[9] = POISON; // no scored position sees it: every log-prob is finite
        lines.add(SparkTests.row("last", last));
        Path input = SparkTests.writeJsonl(tmp.resolve("in/rows.jsonl"), lines);

        Path out = tmp.resolve("out");
        ScoreSummary s =
                SparkTests.spec(model, input, out).partitions(2).topK(3).run();
        assertEquals(lines.size(), s.rows());
        Map<String, Scored> rows = SparkTests.readOutput(out, "parquet");
        assertEquals(lines.size(), rows.size());
        String because = ": the checkpoint's weights or config produce NaN/Inf";
        assertEquals(
                "non-finite log-probs at token 8" + because, rows.get("mid").error());
        assertEquals(
                "non-finite log-probs at token 1" + because, rows.get("first").error());
        for (String id : List.of("mid", "first")) {
            Scored x = rows.get(id);
            assertNull(x.tokenLogprobs(), id);
            assertNull(x.sum(), id);
        }
        assertEquals(2, s.errors(), "mid and first");
        for (String id : List.of("good0", "good1", "good2", "good3", "good4", "good5", "last")) {
            Scored x = rows.get(id);
            assertNull(x.error(), id);
            assertNotNull(x.sum(), id);
            assertTrue(Double.isFinite(x.sum()), id + " sum " + x.sum());
        }
    }

    @Test
    void nanLogitsOfAnUnscoredPositionAreAnErrorWhenTheyAreReturned() {
        Random r = new Random(12);
        long[] last = clean(r, 10);
        last[9] = POISON;
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in-last/rows.jsonl"),
                List.of(SparkTests.row("last", last), SparkTests.row("good", clean(r, 10))));
        Path out = tmp.resolve("out-last");
        SparkTests.spec(model, input, out).partitions(1).logits(LogitsMode.LAST).run();
        Map<String, Scored> rows = SparkTests.readOutput(out, "parquet");
        assertEquals(
                "non-finite logits at token 9: the checkpoint's weights or config produce NaN/Inf",
                rows.get("last").error());
        assertNull(rows.get("good").error());
    }
}
