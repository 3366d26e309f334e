package dev.scorch.udfs.pipeline;

import java.io.IOException;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * A stage's outgoing link written from a thread of its own, frames in the order given, so that the stage reads (and
 * computes) while its last frame is still being encoded and written.
 *
 * <p>Why the ring cannot deadlock with several batches in it: a stage blocks in a socket write only while its next
 * stage is not reading, and the last stage never waits on a write (its queue holds the batches in flight, which it
 * bounds), so it always comes back to reading its previous stage; that stage's write then completes and it reads in
 * turn, and so on round to the first stage, which reads the last stage's token frames. Without this thread the last
 * stage could block writing a token frame to the first stage while the first blocks writing hidden states that the
 * last, blocked, does not read: a cycle of full socket buffers.
 */
final class StageSender implements AutoCloseable {
    private static final StageFrame STOP = StageFrame.end(-1);

    private final StageLink link;
    private final BlockingQueue<StageFrame> queue;
    private final Thread thread;
    private volatile IOException failure;

    /**
     * @param capacity frames queued beyond the one being written; a send waits while the queue is full
     * @param onFailure runs on the sending thread when a write fails (closes the ring, so that the stage's read fails)
     */
    StageSender(StageLink link, int capacity, String name, Runnable onFailure) {
        this.link = link;
        this.queue = new ArrayBlockingQueue<>(capacity);
        this.thread = new Thread(
                () -> {
                    try {
                        for (StageFrame f = queue.take(); f != STOP; f = queue.take()) {
                            link.send(f);
                        }
                    } catch (InterruptedException e) {
                        // closed
                    } catch (IOException e) {
                        failure = e;
                        onFailure.run();
                    }
                },
                name);
        thread.setDaemon(true);
        thread.start();
    }

    /** Queues f after the frames before it; fails when an earlier write failed. */
    void send(StageFrame f) throws IOException {
        try {
            do {
                check(); // a failed thread takes no more: don't wait on its full queue
            } while (!queue.offer(f, StageLink.POLL_MILLIS, java.util.concurrent.TimeUnit.MILLISECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while queueing " + f + " for " + link.peer(), e);
        }
    }

    /**
     * The next frame from up, the stage's incoming link: a failed write closes the ring, breaking this read, so the
     * write's failure is the one reported.
     */
    StageFrame receive(StageLink up) throws IOException {
        try {
            return up.receive();
        } catch (IOException e) {
            check();
            throw e;
        }
    }

    /** Throws the failure of an earlier write, if there was one. */
    void check() throws IOException {
        IOException e = failure;
        if (e != null) {
            throw new IOException("sending to " + link.peer() + " failed: " + e.getMessage(), e);
        }
    }

    /** Waits until every queued frame is written; throws when one could not be. */
    void flush() throws IOException {
        send(STOP);
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while sending to " + link.peer(), e);
        }
        check();
    }

    /** Stops the thread without waiting for what is queued (a write in progress ends when the ring closes). */
    @Override
    public void close() {
        thread.interrupt();
    }
}
