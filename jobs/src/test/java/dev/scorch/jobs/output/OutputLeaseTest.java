package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** One writer per output: the lease is exclusive, names its holder, and is taken over only from a holder that is gone. */
@Timeout(60)
class OutputLeaseTest {
    @TempDir
    Path tmp;

    FileSystem fs;
    org.apache.hadoop.fs.Path out;
    Path leaseFile;

    static final OutputLease.Policy FAST =
            new OutputLease.Policy(Duration.ZERO, Duration.ofSeconds(3), Duration.ofMillis(200));

    @BeforeEach
    void setUp() throws IOException {
        fs = FileSystem.getLocal(new Configuration());
        out = new org.apache.hadoop.fs.Path(tmp.resolve("out").toUri());
        leaseFile = tmp.resolve("_out.scorch-lease");
    }

    @Test
    void aSecondJobIsRefusedNamingTheHolderAndGetsTheLeaseOnceItIsReleased() throws IOException {
        OutputLease first = OutputLease.acquire(fs, out, "score", FAST);
        assertTrue(Files.exists(leaseFile));
        assertTrue(Files.readString(leaseFile).contains(first.runId()));
        OutputLease.HeldException e =
                assertThrows(OutputLease.HeldException.class, () -> OutputLease.acquire(fs, out, "generate", FAST));
        assertTrue(e.getMessage().contains(first.runId()), e.getMessage());
        assertTrue(e.getMessage().contains("pid " + ProcessHandle.current().pid()), e.getMessage());
        assertEquals(first.runId(), e.holder().runId());
        first.close();
        assertFalse(Files.exists(leaseFile), "released");
        try (OutputLease second = OutputLease.acquire(fs, out, "generate", FAST)) {
            assertNotEquals(first.runId(), second.runId());
        }
    }

    @Test
    void ofManyJobsStartedTogetherExactlyOneGetsTheLease() throws Exception {
        int n = 8;
        ExecutorService pool = Executors.newFixedThreadPool(n);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<OutputLease>> tries = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            tries.add(pool.submit(() -> {
                go.await();
                try {
                    return OutputLease.acquire(fs, out, "score", FAST);
                } catch (OutputLease.HeldException e) {
                    return null;
                }
            }));
        }
        go.countDown();
        List<OutputLease> won = new ArrayList<>();
        for (Future<OutputLease> f : tries) {
            OutputLease l = f.get();
            if (l != null) {
                won.add(l);
            }
        }
        for (OutputLease l : won) {
            l.close();
        }
        pool.shutdown();
        assertEquals(1, won.size());
    }

    @Test
    void aWaitingJobGetsTheLeaseWhenTheHolderFinishes() throws Exception {
        OutputLease first = OutputLease.acquire(fs, out, "score", FAST);
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(700);
                first.close();
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        t.start();
        long t0 = System.nanoTime();
        try (OutputLease second = OutputLease.acquire(fs, out, "score", FAST.waiting(Duration.ofSeconds(20)))) {
            assertTrue((System.nanoTime() - t0) / 1e9 >= 0.5, "it waited for the holder");
        }
        t.join();
    }

    @Test
    void theLeaseOfAProcessThatIsGoneOnThisHostIsTakenOverAtOnce() throws Exception {
        Process p = new ProcessBuilder("true").start();
        p.waitFor();
        writeLease("dead-run", OutputLease.hostName(), p.pid(), "1970-01-01T00:00:00Z", Instant.now());
        try (OutputLease l = OutputLease.acquire(fs, out, "score", FAST)) {
            assertTrue(Files.readString(leaseFile).contains(l.runId()));
        }
    }

    @Test
    void anotherHostsLeaseIsTakenOverOnlyOnceItsHeartbeatIsOld() throws Exception {
        writeLease("remote-run", "some-other-host", 1, "x", Instant.now());
        OutputLease.HeldException e =
                assertThrows(OutputLease.HeldException.class, () -> OutputLease.acquire(fs, out, "score", FAST));
        assertTrue(e.getMessage().contains("some-other-host"), e.getMessage());

        writeLease("remote-run", "some-other-host", 1, "x", Instant.now().minusSeconds(10));
        try (OutputLease l = OutputLease.acquire(fs, out, "score", FAST)) {
            assertTrue(Files.readString(leaseFile).contains(l.runId()));
        }
    }

    @Test
    void theHolderRenewsItsHeartbeatAndAHolderThatLostTheLeaseCannotCommit() throws Exception {
        OutputLease l = OutputLease.acquire(fs, out, "score", FAST);
        Instant first = OutputLease.read(fs, lease()).orElseThrow().heartbeat();
        Thread.sleep(700);
        assertTrue(OutputLease.read(fs, lease()).orElseThrow().heartbeat().isAfter(first), "heartbeat renewed");
        l.requireHeld();

        // Judged stale while it lived: another job took the lease over.
        writeLease("usurper", "some-other-host", 1, "x", Instant.now());
        IOException e = assertThrows(IOException.class, l::requireHeld);
        assertTrue(e.getMessage().contains("usurper"), e.getMessage());
        l.close();
        assertTrue(Files.readString(leaseFile).contains("usurper"), "closing leaves the new holder's lease alone");
    }

    @Test
    void aPolicyThatWouldTakeOverLiveHoldersIsRefused() {
        assertThrows(
                IllegalArgumentException.class,
                () -> new OutputLease.Policy(Duration.ZERO, Duration.ofSeconds(1), Duration.ofSeconds(1)));
    }

    private org.apache.hadoop.fs.Path lease() {
        return new org.apache.hadoop.fs.Path(leaseFile.toUri());
    }

    @Test
    void someoneElsesFileUnderTheLeasesNameIsNeverTakenOverOrDeleted() throws Exception {
        java.nio.file.Files.writeString(leaseFile, "my notes, not a lease\n");
        java.nio.file.Files.setLastModifiedTime(
                leaseFile, java.nio.file.attribute.FileTime.from(Instant.now().minus(Duration.ofDays(3))));
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> OutputLease.acquire(fs, out, "score", FAST));
        assertTrue(e.getMessage().contains("is not a Scorch lease"), e.getMessage());
        assertEquals("my notes, not a lease\n", java.nio.file.Files.readString(leaseFile), "left as it was");
    }

    @Test
    void aFifoUnderTheLeasesNameIsRefusedNotRead() throws Exception {
        Process mk = new ProcessBuilder("mkfifo", leaseFile.toString()).start();
        org.junit.jupiter.api.Assumptions.assumeTrue(mk.waitFor() == 0, "mkfifo is needed");
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                Duration.ofSeconds(30),
                () -> assertThrows(IllegalArgumentException.class, () -> OutputLease.acquire(fs, out, "score", FAST)));
        assertTrue(e.getMessage().contains("a device, FIFO or socket"), e.getMessage());
    }

    @Test
    void aFifoInTheInputIsRefusedNotRead() throws Exception {
        java.nio.file.Path in = java.nio.file.Files.createDirectories(tmp.resolve("in"));
        java.nio.file.Files.writeString(in.resolve("a.jsonl"), "{}\n");
        Process mk = new ProcessBuilder("mkfifo", in.resolve("b.jsonl").toString()).start();
        org.junit.jupiter.api.Assumptions.assumeTrue(mk.waitFor() == 0, "mkfifo is needed");
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(
                Duration.ofSeconds(30),
                () -> assertThrows(IllegalArgumentException.class, () -> InputFingerprint.of(fs, in.toString())));
        assertTrue(e.getMessage().contains("b.jsonl is a device, FIFO or socket"), e.getMessage());
    }

    private void writeLease(String runId, String host, long pid, String pidStart, Instant heartbeat)
            throws IOException {
        Files.writeString(
                leaseFile,
                "{\"scorch_lease\":1,\"run_id\":\"" + runId + "\",\"job\":\"score\",\"host\":\"" + host + "\",\"pid\":"
                        + pid + ",\"pid_start\":\"" + pidStart + "\",\"started\":\"" + heartbeat
                        + "\",\"heartbeat\":\"" + heartbeat + "\"}");
    }
}
