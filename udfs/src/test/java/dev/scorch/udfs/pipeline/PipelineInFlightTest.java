package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.runtime.TokenBudgetBatcher;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Several batches in the ring at once (stages as threads on 127.0.0.1): the conformance model over 2 and 3 stages gives
 * one HostDevice's bits with 1, 2 and 3 batches in flight; stages work at the same time only with more than one; a
 * stage failing with several in flight fails every stage; and many large frames in flight do not deadlock the ring.
 */
@Timeout(120)
class PipelineInFlightTest {
    private static final Path MODEL = Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model");
    private static final GemmPrecision P = GemmPrecision.BF16X3;

    @Test
    void severalBatchesInFlightGiveTheSingleDeviceBits() throws Exception {
        ModelWeights w = ModelWeights.open(MODEL);
        int layers = w.config().numHiddenLayers(); // 3
        Random r = new Random(29);
        List<ScoreRequest> rows = new ArrayList<>();
        for (int i = 0; i < 14; i++) {
            int[] p = new int[2 + r.nextInt(23)];
            for (int j = 0; j < p.length; j++) {
                p[j] = r.nextInt(w.config().vocabSize());
            }
            rows.add(new ScoreRequest(p, 1, 2, i == 3 ? LogitsMode.LAST : LogitsMode.NONE));
        }
        List<List<ScoreRequest>> batches = TokenBudgetBatcher.batches(rows, q -> q.tokens().length, 40);
        assertTrue(batches.size() >= 6, batches.size() + " batches");
        List<BatchScores> want = new ArrayList<>();
        try (GpuModel m = GpuModel.load(w, new HostDevice(), P)) {
            Scorer one = new Scorer(m);
            for (List<ScoreRequest> b : batches) {
                BatchScores s = new BatchScores();
                one.score(b, s);
                want.add(s);
            }
        }
        for (int n = 2; n <= 3; n++) {
            List<StageEngine> engines = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                int[] range = PipelinePartition.layers(layers, n, i);
                engines.add(new StageCache.DeviceChain(
                        List.of(DecoderStage.load(w, new HostDevice(), P, range[0], range[1]))));
            }
            for (int d = 1; d <= 3; d++) {
                List<BatchScores> got = run(engines, d, batches, w.config().hiddenSize(), 64);
                for (int k = 0; k < batches.size(); k++) {
                    String what = n + " stages, " + d + " in flight, batch " + k;
                    assertArrayEquals(want.get(k).tokenLogprobs(), got.get(k).tokenLogprobs(), what);
                    assertArrayEquals(want.get(k).topIds(), got.get(k).topIds(), what);
                    assertArrayEquals(want.get(k).topLogprobs(), got.get(k).topLogprobs(), what);
                    assertArrayEquals(want.get(k).logits(), got.get(k).logits(), what);
                }
            }
        }
    }

    @Test
    void stagesWorkAtOnceOnlyWithSeveralBatchesInFlight() throws Exception {
        // Each call waits a little for the other stage to be busy too; with one batch in flight it never is.
        List<List<ScoreRequest>> batches = batches(8, 4);
        for (int d = 1; d <= 2; d++) {
            Busy busy = new Busy(100, 2);
            run(List.of(busy, busy), d, batches, 2, 64);
            assertEquals(d, busy.most.get(), d + " in flight: the most stages busy at once");
        }
    }

    @Test
    void aStageFailingWithSeveralInFlightFailsEveryStage() throws Exception {
        List<List<ScoreRequest>> batches = batches(10, 4);
        StageEngine fine = new Busy(0, 2);
        StageEngine failing = new Busy(0, 2) {
            private int calls;

            @Override
            public float[] forward(PackedBatch batch, float[] in) {
                if (++calls == 3) {
                    throw new IllegalStateException("stage 1 fails on its third batch");
                }
                return super.forward(batch, in);
            }
        };
        List<CompletableFuture<?>> stages = start(List.of(fine, failing, fine), 3, batches, 2, 64);
        ExecutionException e =
                assertThrows(ExecutionException.class, () -> stages.get(1).get(30, TimeUnit.SECONDS));
        assertEquals("stage 1 fails on its third batch", e.getCause().getMessage());
        for (int i : new int[] {0, 2}) {
            e = assertThrows(ExecutionException.class, () -> stages.get(i).get(30, TimeUnit.SECONDS), "stage " + i);
            assertTrue(e.getCause() instanceof IOException || e.getCause() instanceof UncheckedIOException, "" + e);
        }
    }

    @Test
    void manyLargeFramesInFlightDoNotDeadlockTheRing() throws Exception {
        // 40 token frames of 4 MB ahead of 4 MB hidden-state frames: more than the sockets buffer (Linux grows a
        // loopback socket's to tens of MB), so without the last stage's sending thread it would block writing to the
        // first stage while the first blocks writing to it.
        int tokens = 1_000_000;
        List<List<ScoreRequest>> batches = batches(48, tokens);
        Busy none = new Busy(0, 1);
        List<BatchScores> out = run(List.of(none, none), 40, batches, 1, tokens);
        assertEquals(48, out.size());
    }

    /** batches of one row of tokens token ids each (the same row). */
    private static List<List<ScoreRequest>> batches(int count, int tokens) {
        List<List<ScoreRequest>> out = new ArrayList<>();
        int[] t = new int[tokens];
        for (int k = 0; k < count; k++) {
            out.add(List.of(new ScoreRequest(t, 1, 0, LogitsMode.NONE)));
        }
        return out;
    }

    /** Runs the stages' engines as a ring of threads, the last scoring batches with inFlight in the ring. */
    private static List<BatchScores> run(
            List<StageEngine> engines, int inFlight, List<List<ScoreRequest>> batches, int width, int maxTokens)
            throws Exception {
        List<CompletableFuture<?>> stages = start(engines, inFlight, batches, width, maxTokens);
        for (CompletableFuture<?> f : stages) {
            f.get(60, TimeUnit.SECONDS);
        }
        @SuppressWarnings("unchecked")
        List<BatchScores> out =
                (List<BatchScores>) stages.get(stages.size() - 1).get();
        return out;
    }

    /**
     * The stages as threads: relays, then the last stage's scorer over batches (its future's value: the scores); each
     * closes its ring when it ends, as a task's completion does.
     */
    private static List<CompletableFuture<?>> start(
            List<StageEngine> engines, int inFlight, List<List<ScoreRequest>> batches, int width, int maxTokens)
            throws Exception {
        int n = engines.size();
        List<StageRing> rings = TestRings.open(n, width, maxTokens);
        List<CompletableFuture<?>> stages = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int index = i;
            StageRing ring = rings.get(i);
            stages.add(CompletableFuture.supplyAsync(() -> {
                try (ring) {
                    if (index < n - 1) {
                        return StageRelay.run(ring, engines.get(index), index, () -> {});
                    }
                    List<BatchScores> out = new ArrayList<>();
                    for (int k = 0; k < batches.size(); k++) {
                        out.add(new BatchScores());
                    }
                    try (PipelineScorer s = new PipelineScorer(ring, engines.get(index), inFlight, () -> {})) {
                        s.scoreAll(batches, out);
                        s.finish();
                    }
                    return out;
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }));
        }
        return stages;
    }

    /**
     * A stage that computes nothing (hidden states of zeros, no scores) but counts how many stages are inside a call
     * at once; each call waits up to waitMillis for another stage to be inside one too.
     */
    private static class Busy implements StageEngine {
        private final AtomicInteger inside = new AtomicInteger();
        final AtomicInteger most = new AtomicInteger();
        private final long waitMillis;
        private final int width;

        Busy(long waitMillis, int width) {
            this.waitMillis = waitMillis;
            this.width = width;
        }

        private void call() {
            int now = inside.incrementAndGet();
            most.accumulateAndGet(now, Math::max);
            long until = System.nanoTime() + waitMillis * 1_000_000L;
            while (inside.get() < 2 && System.nanoTime() < until) {
                java.util.concurrent.locks.LockSupport.parkNanos(100_000);
            }
            most.accumulateAndGet(inside.get(), Math::max);
            inside.decrementAndGet();
        }

        @Override
        public int first() {
            return 0;
        }

        @Override
        public int end() {
            return 1;
        }

        @Override
        public float[] forward(PackedBatch batch, float[] in) {
            call();
            return new float[batch.numTokens() * width];
        }

        @Override
        public void score(List<ScoreRequest> requests, PackedBatch batch, float[] in, BatchScores out) {
            call();
        }
    }
}
