package dev.scorch.jobs.output;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * One writer per output: a file beside the output, {@code _NAME.scorch-lease}, created atomically before a job touches
 * the output ({@link Files#createFile} on a local disk, {@code FileSystem.create(path, false)} elsewhere, which HDFS
 * does atomically), naming the run, its host, pid and start, and a heartbeat a daemon thread renews. A second job finds
 * the file and refuses at once naming the holder, or waits up to {@link Policy#waitFor} for it to go.
 *
 * <p>A lease whose holder is gone is taken over with a message: on the same host when the holder's process (pid and
 * start time) is not running, on another host when its heartbeat is older than {@link Policy#staleAfter}. The takeover
 * itself is serialised by a second exclusive file, so two jobs that find one stale lease do not both take it. A holder
 * that was judged stale while it lived (a host cut off longer than staleAfter) finds at its next heartbeat, and at
 * {@link #requireHeld}, that it lost the lease, and its run fails before committing.
 */
public final class OutputLease implements AutoCloseable {
    /** How long to wait for a held lease, when one is stale, how often to renew. */
    public record Policy(Duration waitFor, Duration staleAfter, Duration heartbeat) {
        public static final Policy DEFAULT = new Policy(Duration.ZERO, Duration.ofSeconds(120), Duration.ofSeconds(10));

        public Policy {
            if (waitFor.isNegative() || staleAfter.compareTo(heartbeat.multipliedBy(3)) < 0 || heartbeat.isZero()) {
                throw new IllegalArgumentException("lease policy: wait " + waitFor + ", stale after " + staleAfter
                        + ", heartbeat " + heartbeat + " (stale after must be at least three heartbeats)");
            }
        }

        public Policy waiting(Duration d) {
            return new Policy(d, staleAfter, heartbeat);
        }
    }

    /** What a lease file says of its holder. */
    public record Holder(
            String runId, String job, String host, long pid, String pidStart, Instant started, Instant heartbeat) {
        @Override
        public String toString() {
            return job + " run " + runId + " (host " + host + ", pid " + pid + ", started " + started
                    + ", last heartbeat " + heartbeat + ")";
        }
    }

    /** Another job holds the output: the job refuses (exit 2) naming it. */
    public static final class HeldException extends IllegalStateException {
        private final transient Holder holder;

        HeldException(String message, Holder holder) {
            super(message);
            this.holder = holder;
        }

        public Holder holder() {
            return holder;
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration TAKEOVER_STALE = Duration.ofSeconds(60);

    private final FileSystem fs;
    private final Path file;
    private final Path output;
    private final Holder self;
    private final ScheduledExecutorService beat;
    private volatile String lost;
    private boolean released;

    private OutputLease(FileSystem fs, Path file, Path output, Holder self, Policy policy) {
        this.fs = fs;
        this.file = file;
        this.output = output;
        this.self = self;
        this.beat = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "scorch-lease-heartbeat");
            t.setDaemon(true);
            return t;
        });
        long ms = policy.heartbeat().toMillis();
        beat.scheduleAtFixedRate(this::renew, ms, ms, TimeUnit.MILLISECONDS);
    }

    /** The lease file of an output folder or file: {@code _NAME.scorch-lease} beside it. */
    public static Path fileFor(Path output) {
        return new Path(output.getParent(), "_" + output.getName() + ".scorch-lease");
    }

    /**
     * Takes the lease on {@code output} for a run of {@code job}, or throws {@link HeldException} naming the holder once
     * {@link Policy#waitFor} has passed. Writes nothing else.
     */
    public static OutputLease acquire(FileSystem fs, Path output, String job, Policy policy) throws IOException {
        Path out = fs.makeQualified(output);
        Path file = fileFor(out);
        Holder self = new Holder(
                UUID.randomUUID().toString(),
                job,
                hostName(),
                ProcessHandle.current().pid(),
                processStart(ProcessHandle.current()),
                Instant.now(),
                Instant.now());
        // Read only a regular file there: a FIFO under the lease's name would block the read for ever.
        FileKinds.requireOnlyFilesAndFolders(fs, file, "the output's lease", file.toString());
        long deadline = System.nanoTime() + policy.waitFor().toNanos();
        boolean told = false;
        while (true) {
            if (createExclusive(fs, file, render(self))) {
                return new OutputLease(fs, file, out, self, policy);
            }
            Optional<Holder> held = read(fs, file);
            if (held.isEmpty()) {
                continue; // released (or not yet written) between our attempt and the read: try again
            }
            Holder h = held.get();
            String stale = staleness(h, policy.staleAfter());
            if (stale != null && takeOver(fs, file, h, self)) {
                System.err.println("scorch: took over the lease on " + out + " from " + h + ": " + stale);
                return new OutputLease(fs, file, out, self, policy);
            }
            if (System.nanoTime() >= deadline) {
                throw new HeldException(
                        out + " is being written by another job: " + h + " holds " + file
                                + ". Wait for it to finish, choose another --output, or pass --lease-wait SECONDS to wait;"
                                + " a holder that died is taken over on the same host at once, from another host after "
                                + policy.staleAfter().toSeconds() + " s without a heartbeat",
                        h);
            }
            if (!told) {
                System.err.println("scorch: waiting for " + h + " to release " + out);
                told = true;
            }
            sleep(Math.min(1000, Math.max(1, (deadline - System.nanoTime()) / 1_000_000)));
        }
    }

    /** This run's id, recorded in the output's marker. */
    public String runId() {
        return self.runId();
    }

    /** Throws when another job took the lease over (this run was judged stale): nothing may be committed then. */
    public synchronized void requireHeld() throws IOException {
        if (lost == null) {
            Optional<Holder> now = read(fs, file);
            if (now.isEmpty() || !now.get().runId().equals(self.runId())) {
                lost = now.map(Holder::toString).orElse("nobody (the lease file is gone)");
            }
        }
        if (lost != null) {
            throw new IOException("this run lost its lease on " + output + " to " + lost
                    + " (judged stale while it ran); nothing of this run is committed");
        }
    }

    /** Releases the lease when it is still this run's. */
    @Override
    public synchronized void close() throws IOException {
        if (released) {
            return;
        }
        released = true;
        beat.shutdownNow();
        Optional<Holder> now = read(fs, file);
        if (now.isPresent() && now.get().runId().equals(self.runId())) {
            fs.delete(file, false);
        }
    }

    private synchronized void renew() {
        if (released || lost != null) {
            return;
        }
        try {
            Optional<Holder> now = read(fs, file);
            if (now.isEmpty() || !now.get().runId().equals(self.runId())) {
                lost = now.map(Holder::toString).orElse("nobody (the lease file is gone)");
                return;
            }
            overwrite(
                    fs,
                    file,
                    render(new Holder(
                            self.runId(),
                            self.job(),
                            self.host(),
                            self.pid(),
                            self.pidStart(),
                            self.started(),
                            Instant.now())));
        } catch (IOException | RuntimeException e) {
            System.err.println("scorch: could not renew the lease on " + output + ": " + e);
        }
    }

    /** Null while the holder may be alive; else why it is taken for gone. */
    static String staleness(Holder h, Duration staleAfter) {
        if (h.host().equals(hostName())) {
            Optional<ProcessHandle> p = ProcessHandle.of(h.pid());
            boolean running =
                    p.isPresent() && p.get().isAlive() && processStart(p.get()).equals(h.pidStart());
            return running ? null : "its process " + h.pid() + " on this host is not running";
        }
        Duration age = Duration.between(h.heartbeat(), Instant.now());
        return age.compareTo(staleAfter) > 0
                ? "no heartbeat for " + age.toSeconds() + " s (stale after " + staleAfter.toSeconds() + " s)"
                : null;
    }

    /** Replaces a stale lease with ours, unless another job got there first. */
    private static boolean takeOver(FileSystem fs, Path file, Holder stale, Holder self) throws IOException {
        Path lock = new Path(file.getParent(), file.getName() + ".takeover");
        if (!createExclusive(fs, lock, render(self))) {
            try {
                long age = System.currentTimeMillis() - fs.getFileStatus(lock).getModificationTime();
                if (age > TAKEOVER_STALE.toMillis()) {
                    fs.delete(lock, false); // a takeover that died half-way; the next attempt goes through
                }
            } catch (java.io.FileNotFoundException e) {
                // finished meanwhile
            }
            return false;
        }
        try {
            Optional<Holder> now = read(fs, file);
            if (now.isPresent() && !now.get().runId().equals(stale.runId())) {
                return false; // someone took it over and holds it now
            }
            if (now.isPresent()) {
                fs.delete(file, false);
            }
            return createExclusive(fs, file, render(self));
        } finally {
            fs.delete(lock, false);
        }
    }

    private static boolean createExclusive(FileSystem fs, Path file, byte[] content) throws IOException {
        if (isLocal(fs)) {
            java.nio.file.Path p = java.nio.file.Path.of(file.toUri());
            try {
                Files.createDirectories(p.getParent());
                Files.createFile(p); // O_CREAT | O_EXCL: one of two racing jobs gets it
            } catch (FileAlreadyExistsException e) {
                return false;
            }
            Files.write(p, content);
            return true;
        }
        try (OutputStream o = fs.create(file, false)) {
            o.write(content);
            return true;
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            return false;
        } catch (IOException e) {
            if (fs.exists(file)) {
                return false; // some file systems say so with a plain IOException
            }
            throw e;
        }
    }

    private static void overwrite(FileSystem fs, Path file, byte[] content) throws IOException {
        if (isLocal(fs)) {
            Files.write(java.nio.file.Path.of(file.toUri()), content); // in place: the file never disappears
            return;
        }
        try (OutputStream o = fs.create(file, true)) {
            o.write(content);
        }
    }

    /** A lease file is under 1 KiB; a larger file there is not one. */
    private static final int MAX_LEASE_BYTES = 4096;
    /** How render() begins a lease file. */
    private static final String LEASE_START = "{\n  \"scorch_lease\"";

    static Optional<Holder> read(FileSystem fs, Path file) throws IOException {
        byte[] bytes;
        try (InputStream in = fs.open(file)) {
            bytes = in.readNBytes(MAX_LEASE_BYTES + 1);
        } catch (java.io.FileNotFoundException | java.nio.file.NoSuchFileException e) {
            return Optional.empty();
        }
        String text = new String(bytes, StandardCharsets.UTF_8);
        JsonNode n;
        try {
            n = text.isBlank() ? null : JSON.readTree(text);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            n = null;
        }
        // Ours, being written, is empty or begins as render() writes it; anything else is someone else's file.
        boolean ours = n != null
                ? n.has("scorch_lease")
                : bytes.length <= MAX_LEASE_BYTES
                        && (text.isBlank()
                                || LEASE_START.startsWith(text.strip())
                                || text.strip().startsWith(LEASE_START));
        if (!ours) {
            // Someone else's file under the lease's name: never taken over (that would delete it).
            throw new IllegalStateException(file + " is not a Scorch lease (no scorch_lease field); Scorch keeps the"
                    + " output's lease under that name: move the file away");
        }
        if (n == null || !n.hasNonNull("run_id")) {
            // Created but not yet written, or damaged: its age tells whether anyone is behind it.
            long mtime;
            try {
                mtime = fs.getFileStatus(file).getModificationTime();
            } catch (java.io.FileNotFoundException e) {
                return Optional.empty();
            }
            Instant t = Instant.ofEpochMilli(mtime);
            return Optional.of(new Holder("unreadable-" + mtime, "unknown", "unknown", -1, "", t, t));
        }
        return Optional.of(new Holder(
                n.path("run_id").asText(),
                n.path("job").asText(),
                n.path("host").asText(),
                n.path("pid").asLong(),
                n.path("pid_start").asText(),
                Instant.parse(n.path("started").asText(Instant.EPOCH.toString())),
                Instant.parse(n.path("heartbeat").asText(Instant.EPOCH.toString()))));
    }

    private static byte[] render(Holder h) {
        ObjectNode o = JSON.createObjectNode()
                .put("scorch_lease", 1)
                .put("run_id", h.runId())
                .put("job", h.job())
                .put("host", h.host())
                .put("pid", h.pid())
                .put("pid_start", h.pidStart())
                .put("started", h.started().toString())
                .put("heartbeat", h.heartbeat().toString());
        try {
            return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(o).getBytes(StandardCharsets.UTF_8);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static boolean isLocal(FileSystem fs) {
        return fs instanceof LocalFileSystem || fs instanceof RawLocalFileSystem;
    }

    static String hostName() {
        try {
            return InetAddress.getLocalHost().getCanonicalHostName();
        } catch (UnknownHostException e) {
            return System.getenv().getOrDefault("HOSTNAME", "unknown-host");
        }
    }

    private static String processStart(ProcessHandle p) {
        return p.info().startInstant().map(Instant::toString).orElse("");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the output's lease", e);
        }
    }
}
