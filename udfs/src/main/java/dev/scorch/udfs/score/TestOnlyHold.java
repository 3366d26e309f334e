package dev.scorch.udfs.score;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Test-only: keeps a chosen partition's first task attempt running until a test says so, so that a fault test (kill
 * the executor, freeze it) injects its fault while that task runs, whatever the machine's speed. Off unless
 * {@value #DIR} is set (a Spark setting, or a local property of the job), which only tests do; unset, a task pays one
 * settings lookup.
 *
 * <p>With {@value #DIR} = D and {@value #PARTITIONS} = a comma-separated list of partition ids, the first attempt
 * (task attempt 0 of stage attempt 0) of each listed partition hands out its first output row, writes {@code D/held-P}
 * (executor id, pid, stage, attempt, TID) and waits until {@code D/release-P} exists (at most {@link #LIMIT}; a killed
 * task stops waiting). Every other attempt of a listed partition (a retry, a speculative copy, a resubmitted stage's)
 * runs on, and writes {@code D/ran-P-STAGEATTEMPT-ATTEMPT}. Used by the score and generate partition engines.
 */
public final class TestOnlyHold {
    private static final Logger LOG = LoggerFactory.getLogger(TestOnlyHold.class);

    /** Test-only setting: the folder of the hold's marker and release files; unset, nothing is held. */
    public static final String DIR = "spark.scorch.test.hold.dir";
    /** Test-only setting: the partition ids whose first attempt is held (comma-separated). */
    public static final String PARTITIONS = "spark.scorch.test.hold.partitions";
    /** The longest a task is held: a test that never releases it cannot hang the job for ever. */
    public static final Duration LIMIT = Duration.ofMinutes(10);

    private TestOnlyHold() {}

    /** rows, held as the class says when task tc's partition is listed; rows itself otherwise. */
    public static <T> Iterator<T> around(Iterator<T> rows, TaskContext tc) {
        if (tc == null) {
            return rows;
        }
        String dir = setting(tc, DIR);
        if (dir == null) {
            return rows;
        }
        int p = tc.partitionId();
        String listed = setting(tc, PARTITIONS);
        if (listed == null
                || Arrays.stream(listed.split(",")).map(String::trim).noneMatch(s -> s.equals(Integer.toString(p)))) {
            return rows;
        }
        Path d = Path.of(dir);
        Path release = d.resolve("release-" + p);
        String who = describe(tc);
        if (tc.stageAttemptNumber() != 0 || tc.attemptNumber() != 0 || Files.exists(release)) {
            write(d.resolve("ran-" + p + "-" + tc.stageAttemptNumber() + "-" + tc.attemptNumber()), who);
            return rows;
        }
        return new Iterator<>() {
            private boolean held;
            private boolean handedOut;

            @Override
            public boolean hasNext() {
                if (!held && (handedOut || !rows.hasNext())) {
                    held = true;
                    hold(tc, d.resolve("held-" + p), release, who);
                }
                return rows.hasNext();
            }

            @Override
            public T next() {
                T row = rows.next();
                handedOut = true;
                return row;
            }
        };
    }

    private static void hold(TaskContext tc, Path marker, Path release, String who) {
        write(marker, who);
        LOG.warn("scorch test-only hold: {} held until {} exists", who, release);
        long deadline = System.nanoTime() + LIMIT.toNanos();
        while (!Files.exists(release)) {
            tc.killTaskIfInterrupted();
            if (System.nanoTime() > deadline) {
                LOG.warn("scorch test-only hold: {} released after {} without {}", who, LIMIT, release);
                return;
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                tc.killTaskIfInterrupted();
                throw new IllegalStateException("interrupted while held by the test-only hold", e);
            }
        }
        LOG.warn("scorch test-only hold: {} released", who);
    }

    private static String describe(TaskContext tc) {
        SparkEnv env = SparkEnv.get();
        return "executor=" + (env == null ? "?" : env.executorId()) + " pid="
                + ProcessHandle.current().pid()
                + " partition=" + tc.partitionId() + " stage=" + tc.stageId() + "." + tc.stageAttemptNumber()
                + " attempt=" + tc.attemptNumber() + " tid=" + tc.taskAttemptId();
    }

    /** The job's local property, else the application's setting; null when neither is set. */
    private static String setting(TaskContext tc, String key) {
        String v = tc.getLocalProperty(key);
        if (v == null && SparkEnv.get() != null) {
            v = SparkEnv.get().conf().get(key, null);
        }
        return v == null || v.isBlank() ? null : v;
    }

    /** Writes text to f whole (a reader never sees it half written). */
    private static void write(Path f, String text) {
        try {
            Files.createDirectories(f.getParent());
            Path tmp = Files.createTempFile(f.getParent(), ".hold", ".tmp");
            Files.writeString(tmp, text + "\n");
            Files.move(tmp, f, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
