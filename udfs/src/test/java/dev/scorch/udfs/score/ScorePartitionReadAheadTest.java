package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.progress.JobMetrics;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A score task reads its next window on a thread of its own while the engine scores the one before: the same rows,
 * input reads seen during score calls (never without reading ahead), and a failure on either side ends the task with
 * its cause and every buffer released.
 */
@Timeout(120)
class ScorePartitionReadAheadTest {
    private static final Path MODEL = Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model");
    // windows of 4 rows: 25 rows make 7 windows
    private static final ScoreOptions OPTIONS =
            new ScoreOptions(96, 4, 2, LogitsMode.LAST, 1, BackendMode.CPU, GemmPrecision.FP32, 1);

    static ModelSource source;
    static LoadedModel loaded;

    @BeforeAll
    static void model() throws IOException {
        source = new SharedPathSource(MODEL.toAbsolutePath().toString(), ModelManifest.of(MODEL));
        loaded = ExecutorModelCache.load(source);
    }

    @AfterAll
    static void evict() {
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    static ScorePartition partition() {
        StructType in = ScoreSchema.input(DataTypes.LongType);
        StructType out = ScoreSchema.output(DataTypes.LongType, OPTIONS);
        LongAccumulator[] acc = new LongAccumulator[7];
        for (int i = 0; i < acc.length; i++) {
            acc[i] = new LongAccumulator();
        }
        JobMetrics metrics = new JobMetrics(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6]);
        return new ScorePartition(source, OPTIONS, in, out, "conformance", metrics, 64L << 20);
    }

    /** The input, noting whether a row is taken while a score call runs (inScore) and failing at row failAt. */
    static final class Input implements Iterator<InternalRow> {
        final Iterator<InternalRow> rows = ScorePartitionPipelineTest.rows().iterator();
        final AtomicBoolean inScore;
        final AtomicInteger readDuringScore = new AtomicInteger();
        final int failAt;
        int taken;

        Input(AtomicBoolean inScore, int failAt) {
            this.inScore = inScore;
            this.failAt = failAt;
        }

        @Override
        public boolean hasNext() {
            return rows.hasNext();
        }

        @Override
        public InternalRow next() {
            if (taken++ == failAt) {
                throw new IllegalStateException("input row " + failAt + " cannot be read");
            }
            if (awaitScoreCall()) {
                readDuringScore.incrementAndGet();
            }
            return rows.next();
        }

        /**
         * Whether a score call runs, waiting up to 50 ms for one: a reader thread may start before the task's thread
         * has entered its score call, and on a loaded machine it can read a whole window in that gap, which says
         * nothing about overlap. Without reading ahead no call can start while the task's own thread reads.
         */
        private boolean awaitScoreCall() {
            long until = System.nanoTime() + 50_000_000L;
            while (!inScore.get() && System.nanoTime() < until) {
                Thread.onSpinWait();
                Thread.yield();
            }
            return inScore.get();
        }
    }

    /** The CPU scorer, each call slowed by 50 ms (an engine slower than reading) and flagging that it runs. */
    static BatchScorer slowed(AtomicBoolean inScore, int failAtCall) {
        Scorer cpu = new Scorer(loaded.model().on(ExecutorModelCache.ops(1, null)));
        AtomicInteger calls = new AtomicInteger();
        return (requests, into) -> {
            inScore.set(true);
            try {
                Thread.sleep(50);
                if (calls.getAndIncrement() == failAtCall) {
                    throw new IllegalStateException("engine failed on call " + failAtCall);
                }
                cpu.score(requests, into);
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            } finally {
                inScore.set(false);
            }
        };
    }

    static List<UnsafeRow> drain(Iterator<InternalRow> it) {
        List<UnsafeRow> got = new ArrayList<>();
        while (it.hasNext()) {
            got.add(((UnsafeRow) it.next()).copy());
        }
        return got;
    }

    @Test
    void readingAheadGivesTheSameRowsAndReadsWhileTheEngineScores() {
        List<List<UnsafeRow>> results = new ArrayList<>();
        List<Integer> overlapped = new ArrayList<>();
        for (boolean ahead : new boolean[] {false, true}) {
            AtomicBoolean inScore = new AtomicBoolean();
            Input input = new Input(inScore, -1);
            results.add(drain(partition().score(input, loaded, slowed(inScore, -1), 96, 0, "test", () -> {}, ahead)));
            overlapped.add(input.readDuringScore.get());
        }
        assertEquals(25, results.get(0).size());
        assertEquals(results.get(0), results.get(1), "the same rows, bit for bit");
        assertEquals(0, overlapped.get(0), "without reading ahead no row is read during a score call");
        assertTrue(overlapped.get(1) >= 12, overlapped.get(1) + " rows read during score calls");
    }

    @Test
    void anInputFailureOnTheReadingThreadFailsTheTask() {
        AtomicBoolean inScore = new AtomicBoolean();
        Iterator<InternalRow> it =
                partition().score(new Input(inScore, 9), loaded, slowed(inScore, -1), 96, 0, "test", () -> {}, true);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> drain(it));
        assertEquals("input row 9 cannot be read", e.getMessage());
    }

    /**
     * The engine fails while the next window is read: the window is closed at once, after the reader has left its
     * buffers, and every Arrow byte is returned.
     */
    @Test
    void anEngineFailureClosesTheBuffersAfterTheReader() {
        AtomicBoolean inScore = new AtomicBoolean();
        long before = org.apache.spark.sql.util.ArrowUtils.rootAllocator().getAllocatedMemory();
        AtomicBoolean ended = new AtomicBoolean();
        Iterator<InternalRow> it = partition()
                .score(new Input(inScore, -1), loaded, slowed(inScore, 2), 96, 0, "test", () -> ended.set(true), true);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> drain(it));
        assertEquals("engine failed on call 2", e.getMessage());
        assertFalse(ended.get());
        assertEquals(
                before, org.apache.spark.sql.util.ArrowUtils.rootAllocator().getAllocatedMemory());
    }
}
