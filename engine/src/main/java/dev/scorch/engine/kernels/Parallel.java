package dev.scorch.engine.kernels;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;

/**
 * A fixed pool of engine threads. Work items are independent and each is computed the same way whichever
 * thread runs it, so results never depend on the thread count.
 *
 * <p>A decode step makes dozens of small parallel calls, so handing work over must cost far less than a thread
 * wake-up (tens of microseconds on a VM): helpers wait for the next call spinning for {@link #SPIN_NANOS} before
 * they park, and a call allocates nothing. One call at a time uses the helpers; a call made while another is in
 * flight (another task sharing this pool, or a nested call) runs its items on its own thread.
 */
public final class Parallel implements AutoCloseable {
    /** How long an idle helper spins for the next call (or the caller for its helpers) before parking. */
    static final long SPIN_NANOS = 50_000;

    private final int threads;
    private final Helper[] helpers;
    private final AtomicBoolean inUse = new AtomicBoolean();
    // The call in flight: written by its caller before it bumps generation, read by helpers after they see the bump.
    private IntConsumer body;
    private int n;
    private Thread caller;
    private final AtomicInteger next = new AtomicInteger();
    private final AtomicInteger pending = new AtomicInteger(); // helpers that have not finished the call
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private volatile long generation;
    private volatile boolean closed;

    public Parallel(int threads) {
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        }
        this.threads = threads;
        helpers = new Helper[threads - 1];
        for (int t = 0; t < helpers.length; t++) {
            helpers[t] = new Helper("scorch-engine-" + (t + 1));
            helpers[t].thread.start();
        }
    }

    public int threads() {
        return threads;
    }

    /** Runs body(i) for i in [0, n), items handed out dynamically; the caller's thread works too. */
    public void forEach(int n, IntConsumer body) {
        if (helpers.length == 0 || n <= 1 || closed || !inUse.compareAndSet(false, true)) {
            for (int i = 0; i < n; i++) {
                body.accept(i);
            }
            return;
        }
        try {
            this.body = body;
            this.n = n;
            caller = Thread.currentThread();
            next.set(0);
            failure.set(null);
            pending.set(helpers.length);
            generation++; // publishes the call (a volatile write after the plain ones)
            for (Helper h : helpers) {
                if (h.parked) {
                    LockSupport.unpark(h.thread);
                }
            }
            work();
            long start = System.nanoTime();
            while (pending.get() != 0) {
                if (System.nanoTime() - start < SPIN_NANOS) {
                    Thread.yield(); // runnable threads first (the JIT compiler while it warms up), else straight back
                } else {
                    LockSupport.parkNanos(this, 100_000);
                }
            }
            this.body = null;
            Throwable t = failure.get();
            if (t != null) {
                failure.set(null);
                if (t instanceof RuntimeException re) {
                    throw re;
                } else if (t instanceof Error err) {
                    throw err;
                }
                throw new RuntimeException(t);
            }
        } finally {
            inUse.set(false);
        }
    }

    /** Takes items of the call in flight until none is left; a failure is kept (the first) and ends this thread's share. */
    private void work() {
        IntConsumer b = body;
        int count = n;
        try {
            for (int i = next.getAndIncrement(); i < count; i = next.getAndIncrement()) {
                b.accept(i);
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, t);
        }
    }

    @Override
    public void close() {
        closed = true;
        for (Helper h : helpers) {
            LockSupport.unpark(h.thread);
        }
    }

    /** One engine thread: waits for a new generation (spinning, then parked), works on it, reports done. */
    private final class Helper implements Runnable {
        final Thread thread;
        volatile boolean parked;

        Helper(String name) {
            thread = new Thread(this, name);
            thread.setDaemon(true);
        }

        @Override
        public void run() {
            long seen = 0;
            while (true) {
                long start = System.nanoTime();
                while (generation == seen && !closed) {
                    if (System.nanoTime() - start < SPIN_NANOS) {
                        Thread.yield(); // runnable threads first (the JIT compiler while it warms up), else straight
                        // back
                    } else {
                        parked = true;
                        if (generation == seen
                                && !closed) { // re-checked after parked is set: a bump in between unparks us
                            LockSupport.parkNanos(this, 10_000_000L);
                        }
                        parked = false;
                    }
                }
                if (closed) {
                    return;
                }
                seen = generation;
                work();
                Thread c = caller; // read before reporting: once pending reaches 0 a new call may replace it
                if (pending.decrementAndGet() == 0) {
                    LockSupport.unpark(c);
                }
            }
        }
    }
}
