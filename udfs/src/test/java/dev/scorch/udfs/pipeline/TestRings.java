package dev.scorch.udfs.pipeline;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/** Rings of threads on 127.0.0.1, the address exchange done in memory (Spark's allGather in the job). */
final class TestRings {
    static final String HOST = "127.0.0.1";

    private TestRings() {}

    /** allGather among n threads: each call returns every stage's message, by index, once all have called. */
    static final class Exchange {
        private final String[] messages;
        private final CyclicBarrier barrier;

        Exchange(int n) {
            messages = new String[n];
            barrier = new CyclicBarrier(n);
        }

        StageRing.Exchange of(int index) {
            return m -> {
                messages[index] = m;
                try {
                    barrier.await(30, TimeUnit.SECONDS);
                } catch (Exception e) {
                    throw new IOException(e);
                }
                return Arrays.asList(messages.clone());
            };
        }
    }

    /** n stages' rings being opened, by index. */
    static List<CompletableFuture<StageRing>> open(int n, IntFunction<StageRing.Settings> s) {
        Exchange ex = new Exchange(n);
        List<CompletableFuture<StageRing>> rings = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int index = i;
            rings.add(CompletableFuture.supplyAsync(() -> {
                try {
                    return StageRing.open(s.apply(index), ex.of(index), () -> {});
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }));
        }
        return rings;
    }

    /** n open rings of stages of hidden width and frames of up to maxTokens tokens. */
    static List<StageRing> open(int n, int width, int maxTokens) throws Exception {
        List<StageRing> rings = new ArrayList<>();
        for (CompletableFuture<StageRing> f :
                open(n, i -> new StageRing.Settings(i, n, HOST, width, maxTokens, 10_000, 60_000))) {
            rings.add(f.get());
        }
        return rings;
    }
}
