package dev.scorch.engine.tokenizer;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import dev.scorch.engine.tokenizer.ChatTemplate.ChatTemplateException;
import java.lang.management.ManagementFactory;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Runs one chat-template render on a worker thread of its own, so that a hostile template cannot take the
 * calling (Spark task) thread down: the worker has a known stack ({@link #STACK_BYTES}), every Throwable
 * the render throws becomes a {@link ChatTemplateException}, and the render is held to a time limit and an
 * allocation budget.
 *
 * <p>The limits are enforced cooperatively: {@link #check()} runs before every template node and every
 * property access or method call the template makes (through {@link TemplateSandbox}), and throws once the
 * render is past its deadline or has allocated more than its budget. Jinjava cannot be stopped from the
 * outside, so a render stuck in a single step that never comes back to a check (none is known: the steps
 * are bounded by the sandbox's size limits and the bracket-depth check) is abandoned when the caller's wait
 * runs out; at most {@link #MAX_ABANDONED} such threads are allowed before renders are refused outright.
 *
 * <p>Worker threads are pooled (reused, idle ones end after a minute): the hand-off costs a few
 * microseconds a render.
 */
final class RenderGuard {
    /** Stack of a worker thread: far more than any real template needs, and a fixed bound on recursion. */
    static final long STACK_BYTES = 4L << 20;
    /**
     * The time limit is on the worker's CPU time (a loaded executor or class loading on a cold JVM stretches
     * wall time, not work); the caller waits this many times the limit in wall time, plus a second, for a
     * render that has stopped checking, before it gives up on it.
     */
    private static final int WALL_FACTOR = 4;

    static final String STACK_OVERFLOW = "chat template overflowed the " + (STACK_BYTES >> 20)
            + " MiB render stack: it nests or recurses too deeply";
    /** Renders that never came back; beyond this many, new renders are refused. */
    static final int MAX_ABANDONED = 4;
    /** Checks between two looks at the clock and the allocation counter (each costs tens of ns). */
    private static final int CHECK_EVERY = 16;

    private static final AtomicInteger THREADS = new AtomicInteger();
    private static final AtomicInteger ABANDONED = new AtomicInteger();
    private static final ThreadPoolExecutor POOL = new ThreadPoolExecutor(
            0, Integer.MAX_VALUE, 60, TimeUnit.SECONDS, new SynchronousQueue<>(), RenderGuard::newThread);
    private static final ThreadLocal<Budget> CURRENT = new ThreadLocal<>();
    private static final com.sun.management.ThreadMXBean THREAD_MX = threadCounters();
    private static final boolean COUNT_ALLOCATION = THREAD_MX != null && THREAD_MX.isThreadAllocatedMemoryEnabled();
    private static final boolean COUNT_CPU =
            THREAD_MX != null && THREAD_MX.isCurrentThreadCpuTimeSupported() && THREAD_MX.isThreadCpuTimeEnabled();

    private RenderGuard() {}

    private static Thread newThread(Runnable r) {
        // No inherited thread locals: the worker outlives the task that happened to start it.
        Thread t = new Thread(null, r, "scorch-chat-template-" + THREADS.incrementAndGet(), STACK_BYTES, false);
        t.setDaemon(true);
        t.setContextClassLoader(RenderGuard.class.getClassLoader());
        return t;
    }

    private static com.sun.management.ThreadMXBean threadCounters() {
        try {
            if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean m
                    && m.isThreadAllocatedMemorySupported()) {
                return m;
            }
        } catch (LinkageError | RuntimeException e) {
            // No jdk.management module: renders are held to wall time and the size limits only.
        }
        return null;
    }

    /** Renders abandoned after their limit that are still running (for tests). */
    static int abandoned() {
        return ABANDONED.get();
    }

    /**
     * Runs {@code render} on a worker thread within {@code limits}; returns its result or throws a
     * {@link ChatTemplateException} saying which limit was hit or what went wrong.
     */
    static String run(Callable<String> render, ChatTemplate.Limits limits) {
        int stuck = ABANDONED.get();
        if (stuck >= MAX_ABANDONED) {
            throw new ChatTemplateException("chat template not rendered: " + stuck
                    + " earlier renders ran past the time limit and have not stopped");
        }
        Budget budget = new Budget(limits);
        FutureTask<String> task = new FutureTask<>(() -> onWorker(render, budget));
        POOL.execute(task);
        try {
            return task.get(WALL_FACTOR * limits.timeNanos() + TimeUnit.SECONDS.toNanos(1), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            budget.abort(budget.timeMessage());
            if (budget.state.compareAndSet(Budget.RUNNING, Budget.ABANDONED)) {
                ABANDONED.incrementAndGet();
                throw new ChatTemplateException(budget.timeMessage());
            }
            return resultOf(task); // it finished just now
        } catch (InterruptedException e) {
            budget.abort("chat template rendering was interrupted");
            Thread.currentThread().interrupt();
            throw new ChatTemplateException("chat template rendering was interrupted");
        } catch (ExecutionException e) {
            throw asTemplateException(e.getCause());
        }
    }

    private static String resultOf(FutureTask<String> task) {
        try {
            return task.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ChatTemplateException("chat template rendering was interrupted");
        } catch (ExecutionException e) {
            throw asTemplateException(e.getCause());
        }
    }

    private static ChatTemplateException asTemplateException(Throwable t) {
        if (t instanceof ChatTemplateException c) {
            return c;
        }
        return new ChatTemplateException("chat template failed: " + t, t);
    }

    /** The worker side: the render with the budget installed, every Throwable turned into a clear message. */
    private static String onWorker(Callable<String> render, Budget budget) {
        CURRENT.set(budget);
        try {
            budget.start();
            String out = render.call();
            if (budget.aborted() != null) { // stopped in a step whose error Jinjava kept to itself
                throw new ChatTemplateException(budget.aborted());
            }
            return out;
        } catch (Throwable t) {
            String aborted = budget.aborted();
            if (aborted != null) {
                throw new ChatTemplateException(aborted); // whatever Jinjava made of the abort on its way out
            }
            if (t instanceof StackOverflowError) {
                throw new ChatTemplateException(STACK_OVERFLOW);
            }
            if (t instanceof ChatTemplateException c) {
                throw c;
            }
            if (t instanceof OutOfMemoryError) {
                throw new ChatTemplateException("chat template ran out of memory: " + t.getMessage());
            }
            throw new ChatTemplateException("chat template failed: " + t, t);
        } finally {
            CURRENT.remove();
            // Jinjava keeps a per-thread stack of interpreters; an aborted render may leave one behind.
            while (JinjavaInterpreter.getCurrentMaybe().isPresent()) {
                JinjavaInterpreter.popCurrent();
            }
            if (!budget.state.compareAndSet(Budget.RUNNING, Budget.DONE)) {
                ABANDONED.decrementAndGet();
            }
        }
    }

    /**
     * Throws when the render on this thread is past one of its limits; a no-op outside a guarded render.
     * Called by the template node pre-processor and the sandbox resolver.
     */
    static void check() {
        Budget b = CURRENT.get();
        if (b != null) {
            b.tick();
        }
    }

    /**
     * Stops the render on this thread for a reason of the sandbox's (a refused call); the caller throws
     * what this returns.
     */
    static Error refuse(String why) {
        Budget b = CURRENT.get();
        if (b == null) {
            return new Aborted(why);
        }
        b.abort(why);
        return new Aborted(b.aborted());
    }

    /** The limits one render is held to, and why it was stopped, if it was. */
    static final class Budget {
        static final int RUNNING = 0;
        static final int DONE = 1;
        static final int ABANDONED = 2;
        private static final long NOT_READ = Long.MIN_VALUE;
        /** Renders shorter than this never read the thread's CPU clock (see check()). */
        private static final long CPU_BASELINE_AFTER_NANOS = 1_000_000;

        private final ChatTemplate.Limits limits;
        private final long startNanos = System.nanoTime();
        private long cpuAtStart = NOT_READ;
        private long allocatedAtStart;
        private int ticks;
        private volatile String aborted;
        final AtomicInteger state = new AtomicInteger(RUNNING);

        Budget(ChatTemplate.Limits limits) {
            this.limits = limits;
        }

        void start() {
            allocatedAtStart = COUNT_ALLOCATION ? THREAD_MX.getCurrentThreadAllocatedBytes() : 0;
        }

        void tick() {
            String a = aborted;
            if (a != null) {
                throw new Aborted(a);
            }
            if (++ticks % CHECK_EVERY == 0) {
                check();
            }
        }

        void check() {
            // The thread's CPU clock costs microseconds to read: a render that ends within a millisecond never
            // reads it, and one that does is measured from then on (CPU time never runs ahead of wall time, so
            // nothing is read again before the wall clock passes the limit).
            long wall = System.nanoTime() - startNanos;
            if (COUNT_CPU && cpuAtStart == NOT_READ && wall > CPU_BASELINE_AFTER_NANOS) {
                cpuAtStart = THREAD_MX.getCurrentThreadCpuTime();
            }
            if (wall > limits.timeNanos()
                    && (cpuAtStart == NOT_READ
                            || THREAD_MX.getCurrentThreadCpuTime() - cpuAtStart > limits.timeNanos())) {
                abort(timeMessage());
            }
            if (COUNT_ALLOCATION
                    && THREAD_MX.getCurrentThreadAllocatedBytes() - allocatedAtStart > limits.maxAllocatedBytes()) {
                abort("chat template allocated more than the " + (limits.maxAllocatedBytes() >> 20)
                        + " MiB one render may allocate");
            }
            String a = aborted;
            if (a != null) {
                throw new Aborted(a);
            }
        }

        String timeMessage() {
            return "chat template exceeded the " + limits.timeDescription() + " render time limit";
        }

        /** Stops the render at its next check; the first reason given wins. */
        synchronized void abort(String why) {
            if (aborted == null) {
                aborted = why;
            }
        }

        String aborted() {
            return aborted;
        }
    }

    /**
     * Unwinds an aborted render. An Error, so that Jinjava's {@code catch (Exception)} blocks let it through
     * where they can; where it is caught anyway (reflective calls wrap it), the budget remembers the abort and
     * every later check throws again, so the render still ends at once.
     */
    static final class Aborted extends Error {
        private static final long serialVersionUID = 1L;

        Aborted(String message) {
            super(message, null, false, false);
        }
    }
}
