package dev.scorch.udfs.pipeline;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;

/**
 * One TCP connection between neighbouring stages, sending or receiving {@link StageFrame}s. Reads wait in short
 * polls so that a task Spark kills (its barrier stage failed elsewhere) notices within a poll rather than staying
 * blocked in a socket read, and a peer that sends nothing for the idle timeout fails the read, naming it.
 */
public final class StageLink implements AutoCloseable {
    /** How often a blocked read checks whether its task was killed. */
    static final int POLL_MILLIS = 500;

    private final Socket socket;
    private final String peer;
    private final InputStream in;
    private final OutputStream out;
    private final int width;
    private final int maxTokens;
    private long idleMillis;
    private final Cancel cancel;
    private byte[] buf;
    private final int[] len = new int[1];

    /** Thrown by a read when the task should stop (Spark killed it); checked between polls. */
    public interface Cancel {
        void check();
    }

    StageLink(Socket socket, String peer, int width, int maxTokens, long idleMillis, Cancel cancel) throws IOException {
        this.socket = socket;
        this.peer = peer;
        this.width = width;
        this.maxTokens = maxTokens;
        this.idleMillis = idleMillis;
        this.cancel = cancel;
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(POLL_MILLIS);
        this.in = socket.getInputStream();
        this.out = socket.getOutputStream();
    }

    /** Sets how long a read waits for the peer's next bytes. */
    void idleMillis(long millis) {
        idleMillis = millis;
    }

    /** The other end, in words (stage index and address), for messages. */
    public String peer() {
        return peer;
    }

    public void send(StageFrame f) throws IOException {
        buf = StageWire.encode(f, buf, len);
        out.write(buf, 0, len[0]);
        out.flush();
    }

    /** The next frame; fails on a broken, corrupt or silent connection, and when the task is killed. */
    public StageFrame receive() throws IOException {
        return StageWire.decode(this::readFully, width, maxTokens, peer);
    }

    private void readFully(byte[] dst, int off, int n) throws IOException {
        long idleSince = System.nanoTime();
        while (n > 0) {
            int got;
            try {
                got = in.read(dst, off, n);
            } catch (SocketTimeoutException e) {
                cancel.check();
                if (System.nanoTime() - idleSince > idleMillis * 1_000_000L) {
                    throw new SocketTimeoutException(
                            peer + " sent nothing for " + idleMillis / 1000 + " s (spark.scorch.pipeline.idleTimeout)");
                }
                continue;
            }
            if (got < 0) {
                throw new EOFException(peer + " closed the connection"
                        + " (its task ended or failed: see its log; Spark retries the barrier stage)");
            }
            off += got;
            n -= got;
            idleSince = System.nanoTime();
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing a socket that failed already: nothing more to do
        }
    }
}
