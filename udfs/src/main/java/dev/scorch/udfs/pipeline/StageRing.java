package dev.scorch.udfs.pipeline;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.security.SecureRandom;
import java.util.List;

/**
 * The connections of one stage of an N-stage pipeline: stage i sends to stage i+1 and receives from stage i-1, and the
 * last stage sends each batch's tokens round to the first, so the stages form a ring. Set-up: each stage listens on an
 * ephemeral port, the stages exchange "host:port:nonce" (Spark's {@code BarrierTaskContext.allGather}), each connects
 * to the next and says who it is with the next's nonce, then accepts the one connection from the previous. A
 * connection that is not the previous stage of this exchange (a stray client, a stage of an earlier attempt) is
 * closed and the wait goes on; none in the connect timeout fails the set-up.
 */
public final class StageRing implements AutoCloseable {
    private final StageLink up; // from stage i-1 (the first stage: from the last)
    private final StageLink down; // to stage i+1 (the last stage: to the first)

    /** The address exchange: every stage's message, by stage index (Spark's allGather). */
    public interface Exchange {
        List<String> allGather(String message) throws IOException;
    }

    /**
     * @param index     this stage, 0 .. stages-1
     * @param host      the address this stage listens on and the others reach it at
     * @param width     the model's hidden size (frames' hidden states must have it)
     * @param maxTokens the most tokens a frame may carry
     * @param connectMillis how long set-up may take once the addresses are known
     * @param idleMillis    how long a read waits for its peer's next bytes
     */
    public record Settings(
            int index, int stages, String host, int width, int maxTokens, long connectMillis, long idleMillis) {
        public Settings {
            if (stages < 2 || index < 0 || index >= stages) {
                throw new IllegalArgumentException("stage " + index + " of " + stages + ": a ring needs 2 or more");
            }
        }
    }

    private StageRing(StageLink up, StageLink down) {
        this.up = up;
        this.down = down;
    }

    public static StageRing open(Settings s, Exchange exchange, StageLink.Cancel cancel) throws IOException {
        long nonce = new SecureRandom().nextLong();
        StageLink down = null;
        try (ServerSocket server = new ServerSocket()) {
            server.bind(new InetSocketAddress(InetAddress.getByName(s.host()), 0), s.stages() + 8);
            List<String> all = exchange.allGather(s.host() + ":" + server.getLocalPort() + ":" + nonce);
            if (all.size() != s.stages()) {
                throw new IOException(
                        "the address exchange gave " + all.size() + " addresses for " + s.stages() + " stages");
            }
            int next = (s.index() + 1) % s.stages();
            int prev = (s.index() + s.stages() - 1) % s.stages();
            Address to = Address.parse(all.get(next), next);
            long deadline = System.nanoTime() + s.connectMillis() * 1_000_000L;

            // Connect first: the next stage's listening socket queues the connection before it accepts.
            Socket out = new Socket();
            try {
                out.connect(new InetSocketAddress(to.host, to.port), (int) Math.max(1, s.connectMillis()));
            } catch (IOException e) {
                out.close();
                throw new IOException(
                        "stage " + s.index() + " cannot connect to stage " + next + " at " + to.host + ":" + to.port
                                + ": " + e.getMessage(),
                        e);
            }
            down = new StageLink(
                    out,
                    "stage " + next + " (" + to.host + ":" + to.port + ")",
                    s.width(),
                    s.maxTokens(),
                    s.idleMillis(),
                    cancel);
            down.send(StageFrame.hello(s.index(), s.stages(), to.nonce));

            server.setSoTimeout(StageLink.POLL_MILLIS);
            String from = "stage " + prev + " (" + Address.parse(all.get(prev), prev) + ")";
            while (true) {
                Socket in;
                try {
                    in = server.accept();
                } catch (SocketTimeoutException e) {
                    cancel.check();
                    if (System.nanoTime() > deadline) {
                        throw new IOException("stage " + s.index() + " waited " + s.connectMillis() / 1000 + " s for "
                                + from + " to connect (spark.scorch.pipeline.connectTimeout)");
                    }
                    continue;
                }
                StageLink up = new StageLink(in, from, s.width(), s.maxTokens(), s.connectMillis(), cancel);
                StageFrame hello;
                try {
                    hello = up.receive();
                } catch (IOException e) {
                    up.close(); // not a stage that speaks the protocol: wait for the real one
                    continue;
                }
                if (hello.kind() != StageFrame.Kind.HELLO
                        || hello.seq() != prev
                        || hello.width() != s.stages()
                        || hello.nonce() != nonce) {
                    up.close();
                    continue;
                }
                up.idleMillis(s.idleMillis()); // the hello came within the connect timeout; batches may take longer
                return new StageRing(up, down);
            }
        } catch (IOException | RuntimeException e) {
            if (down != null) {
                down.close();
            }
            throw e;
        }
    }

    /** Where frames come from: the previous stage (for the first stage, the last, which sends tokens round). */
    public StageLink up() {
        return up;
    }

    /** Where frames go: the next stage (for the last stage, the first). */
    public StageLink down() {
        return down;
    }

    @Override
    public void close() {
        up.close();
        down.close();
    }

    /** One stage's exchanged "host:port:nonce". */
    private record Address(String host, int port, long nonce) {
        static Address parse(String s, int stage) throws IOException {
            int b = s.lastIndexOf(':');
            int a = b < 0 ? -1 : s.lastIndexOf(':', b - 1);
            try {
                return new Address(
                        s.substring(0, a), Integer.parseInt(s.substring(a + 1, b)), Long.parseLong(s.substring(b + 1)));
            } catch (RuntimeException e) {
                throw new IOException("stage " + stage + " gave the address '" + s + "', not host:port:nonce", e);
            }
        }

        @Override
        public String toString() {
            return host + ":" + port;
        }
    }
}
