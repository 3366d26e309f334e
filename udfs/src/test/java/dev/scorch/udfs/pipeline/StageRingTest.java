package dev.scorch.udfs.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Ring set-up and its failures on 127.0.0.1, the address exchange done in memory (Spark's allGather in the job):
 * frames go round the ring in order; a stray client is turned away; a stage that never connects, a silent peer, a
 * closed peer and a killed task each fail with a message that names the other end.
 */
@Timeout(60)
class StageRingTest {
    private static final String HOST = TestRings.HOST;

    private static StageRing.Settings settings(int index, int n, long connectMillis, long idleMillis) {
        return new StageRing.Settings(index, n, HOST, 2, 64, connectMillis, idleMillis);
    }

    @Test
    void framesGoRoundTheRingInOrder() throws Exception {
        int n = 3;
        List<StageRing> rings = new ArrayList<>();
        for (CompletableFuture<StageRing> f : TestRings.open(n, i -> settings(i, n, 10_000, 10_000))) {
            rings.add(f.get());
        }
        try {
            for (int k = 0; k < 3; k++) {
                StageFrame f = StageFrame.hidden(k, new int[] {1, 1}, new int[] {k, 7}, new float[] {k, 1, 2, 3}, 2);
                for (int i = 0; i < n; i++) { // stage i sends to i+1, the last to the first
                    rings.get(i).down().send(f);
                    assertEquals(f, rings.get((i + 1) % n).up().receive());
                }
            }
            assertEquals("stage 2 (127.0.0.1:", rings.get(0).up().peer().substring(0, 19));
            assertTrue(rings.get(0).down().peer().startsWith("stage 1 (127.0.0.1:"));
        } finally {
            rings.forEach(StageRing::close);
        }
    }

    @Test
    void aStrayClientIsTurnedAwayAndTheRealStageAccepted() throws Exception {
        // Stage 0 of 2 listens; before stage 1 connects, a client that knows the address but not the nonce says hello,
        // and another sends garbage. Both are closed; the ring still forms.
        TestRings.Exchange ex = new TestRings.Exchange(2);
        String[] stage0 = new String[1];
        StageRing.Exchange spy = m -> {
            stage0[0] = m;
            String[] hp = m.split(":");
            try (Socket stray = new Socket(hp[0], Integer.parseInt(hp[1]));
                    Socket junk = new Socket(hp[0], Integer.parseInt(hp[1]))) {
                int[] len = new int[1];
                byte[] hello = StageWire.encode(StageFrame.hello(1, 2, 12345L), null, len);
                stray.getOutputStream().write(hello, 0, len[0]);
                OutputStream j = junk.getOutputStream();
                j.write("hello?".getBytes());
                j.flush();
            }
            return ex.of(0).allGather(m);
        };
        CompletableFuture<StageRing> r0 = CompletableFuture.supplyAsync(() -> {
            try {
                return StageRing.open(settings(0, 2, 10_000, 10_000), spy, () -> {});
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        });
        StageRing r1 = StageRing.open(settings(1, 2, 10_000, 10_000), ex.of(1), () -> {});
        try (StageRing ring0 = r0.get()) {
            StageFrame f = StageFrame.tokens(0, new int[] {2}, new int[] {3, 4});
            r1.down().send(f);
            assertEquals(f, ring0.up().receive());
        } finally {
            r1.close();
        }
    }

    @Test
    void aStageThatNeverConnectsFailsTheSetUp() {
        // Stage 1 of 2 takes part in the exchange (its address is real) but never connects to stage 0.
        TestRings.Exchange ex = new TestRings.Exchange(2);
        CompletableFuture<Void> absent = CompletableFuture.runAsync(() -> {
            try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getByName(HOST))) {
                ex.of(1).allGather(HOST + ":" + s.getLocalPort() + ":1");
                Thread.sleep(3000);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        IOException e =
                assertThrows(IOException.class, () -> StageRing.open(settings(0, 2, 1000, 10_000), ex.of(0), () -> {}));
        assertTrue(e.getMessage().startsWith("stage 0 waited 1 s for stage 1 (127.0.0.1:"), e.getMessage());
        assertTrue(e.getMessage().endsWith("to connect (spark.scorch.pipeline.connectTimeout)"), e.getMessage());
        absent.join();
    }

    @Test
    void aSilentPeerAClosedPeerAndAKilledTaskFailTheRead() throws Exception {
        List<CompletableFuture<StageRing>> f = TestRings.open(2, i -> settings(i, 2, 10_000, 1200));
        StageRing r0 = f.get(0).get();
        StageRing r1 = f.get(1).get();
        IOException silent = assertThrows(IOException.class, () -> r0.up().receive());
        assertTrue(
                silent.getMessage()
                        .matches("stage 1 \\(127\\.0\\.0\\.1:\\d+\\) sent nothing for 1 s"
                                + " \\(spark\\.scorch\\.pipeline\\.idleTimeout\\)"),
                silent.getMessage());
        r1.close();
        IOException closed = assertThrows(IOException.class, () -> r0.up().receive());
        assertTrue(
                closed.getMessage().matches("stage 1 \\(127\\.0\\.0\\.1:\\d+\\) closed the connection .*"),
                closed.getMessage());
        r0.close();

        AtomicBoolean killed = new AtomicBoolean();
        TestRings.Exchange ex = new TestRings.Exchange(2);
        List<CompletableFuture<StageRing>> g = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            int index = i;
            g.add(CompletableFuture.supplyAsync(() -> {
                try {
                    return StageRing.open(settings(index, 2, 10_000, 600_000), ex.of(index), () -> {
                        if (killed.get()) {
                            throw new IllegalStateException("killed");
                        }
                    });
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }));
        }
        try (StageRing k0 = g.get(0).get();
                StageRing k1 = g.get(1).get()) {
            CompletableFuture<StageFrame> waiting = CompletableFuture.supplyAsync(() -> {
                try {
                    return k0.up().receive();
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            Thread.sleep(200);
            killed.set(true);
            ExecutionException e = assertThrows(ExecutionException.class, () -> waiting.get(5, TimeUnit.SECONDS));
            assertEquals("killed", e.getCause().getMessage());
        }
    }
}
