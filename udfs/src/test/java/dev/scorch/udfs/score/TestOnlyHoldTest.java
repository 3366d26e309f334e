package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.udfs.api.ApiTests;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The test-only hold on local[2]: only the first attempt of a listed partition waits (a retry of it runs on), and a
 * held attempt goes on once its release file exists.
 */
@Timeout(120)
class TestOnlyHoldTest {
    static final List<Integer> ROWS = IntStream.range(0, 40).boxed().toList();
    static ExecutorService pool;

    @TempDir
    Path dir;

    @BeforeAll
    static void start() {
        pool = Executors.newSingleThreadExecutor();
    }

    @AfterAll
    static void stop() {
        pool.shutdownNow();
    }

    /** A 4-partition job through the hold, run on a thread of its own with the hold's settings as local properties. */
    Future<List<Integer>> job(String partitions) {
        SparkContext sc = ApiTests.spark().sparkContext();
        return pool.submit(() -> {
            sc.setLocalProperty(TestOnlyHold.DIR, dir.toString());
            sc.setLocalProperty(TestOnlyHold.PARTITIONS, partitions);
            try {
                return new JavaSparkContext(sc)
                        .parallelize(ROWS, 4)
                        .mapPartitions(it -> TestOnlyHold.around(it, TaskContext.get()))
                        .collect();
            } finally {
                sc.setLocalProperty(TestOnlyHold.DIR, null);
                sc.setLocalProperty(TestOnlyHold.PARTITIONS, null);
            }
        });
    }

    Path await(String name) throws InterruptedException {
        Path f = dir.resolve(name);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!Files.exists(f)) {
            assertTrue(System.nanoTime() < deadline, name + " never appeared");
            Thread.sleep(20);
        }
        return f;
    }

    List<String> markers() throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString())
                    .filter(n -> !n.startsWith("."))
                    .sorted()
                    .toList();
        }
    }

    @Test
    void onlyTheFirstAttemptOfTheListedPartitionIsHeld() throws Exception {
        Future<List<Integer>> job = job("1");
        String held = Files.readString(await("held-1")).trim();
        assertTrue(held.contains("partition=1 ") && held.contains("attempt=0 "), held);
        Thread.sleep(500);
        assertFalse(job.isDone(), "the job ended while partition 1 was held");
        long tid = Long.parseLong(held.substring(held.indexOf("tid=") + 4));
        // The held attempt is killed (Spark runs it again): the retry, attempt 1, is not held, and no release is
        // needed.
        ApiTests.spark().sparkContext().killTaskAttempt(tid, true, "TestOnlyHoldTest kills the held attempt");
        assertEquals(ROWS, job.get(60, TimeUnit.SECONDS));
        assertEquals(List.of("held-1", "ran-1-0-1"), markers());
    }

    @Test
    void aHeldAttemptGoesOnOnceReleased() throws Exception {
        Future<List<Integer>> job = job("0, 2");
        await("held-0");
        await("held-2"); // both cores held: partition 3 waits
        Thread.sleep(500);
        assertFalse(job.isDone(), "the job ended while partitions 0 and 2 were held");
        Files.createFile(dir.resolve("release-0"));
        Thread.sleep(500);
        assertFalse(job.isDone(), "the job ended while partition 2 was held");
        Files.createFile(dir.resolve("release-2"));
        assertEquals(ROWS, job.get(60, TimeUnit.SECONDS));
        assertEquals(List.of("held-0", "held-2", "release-0", "release-2"), markers());
    }

    @Test
    void unsetHoldsNothing() throws Exception {
        SparkContext sc = ApiTests.spark().sparkContext();
        List<Integer> out = pool.submit(() -> new JavaSparkContext(sc)
                        .parallelize(ROWS, 4)
                        .mapPartitions(it -> TestOnlyHold.around(it, TaskContext.get()))
                        .collect())
                .get(60, TimeUnit.SECONDS);
        assertEquals(ROWS, out);
        assertEquals(List.of(), markers());
    }
}
