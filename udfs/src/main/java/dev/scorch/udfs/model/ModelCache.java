package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One host's model cache folder: which of its copies running JVMs use, and room for new ones.
 *
 * <p>A JVM that uses a cached copy holds a shared lock on {@code leases/<hash>.lease} until it exits. The OS drops a lock
 * when its process dies, SIGKILL included, so a lease nobody holds means no running application uses that copy. A copy
 * nobody leases is removed: at a JVM's first use of the cache when it was last used longer ago than the configured age;
 * at once (least recently used first) when a new copy needs its room; and, when the age is 0, at the exit of the last
 * JVM that used it. Copies are assembled under an exclusive lock on {@code leases/<hash>.assemble}, so the executors
 * of one host make one copy between them, not one each.
 *
 * <p>Only what Scorch writes is ever removed: {@code <hash>/} folders that hold the completion marker with that hash,
 * and {@code <hash>.partial-*} folders (hash: 64 hex digits; 12 for temporary folders of older versions). The lease files
 * stay (empty, one per model): deleting one could let a JVM that opened it just before hold a lease nobody sees.
 */
final class ModelCache {
    private static final Logger LOG = LoggerFactory.getLogger(ModelCache.class);
    static final String LEASES = "leases";
    static final String PARTIAL = ".partial-";

    private static final Pattern COPY = Pattern.compile("[0-9a-f]{64}");
    private static final Pattern TEMPORARY = Pattern.compile("([0-9a-f]{64})\\.partial-.+");
    private static final Pattern OLD_TEMPORARY = Pattern.compile("[0-9a-f]{12}\\.partial-[0-9]+");
    private static final Map<Path, ModelCache> CACHES = new ConcurrentHashMap<>();

    private final Path root;
    /**
     * This JVM's leases by content hash. Their files must not be opened again here while leased (setting their time
     * included): closing any descriptor of a file drops all of this process's locks on it (POSIX record locks).
     */
    private final Map<String, Lease> held = new ConcurrentHashMap<>();

    private final Map<String, Object> assembling = new ConcurrentHashMap<>();
    private volatile boolean swept;
    private volatile Duration exitAge;

    private record Lease(FileChannel channel, FileLock lock) {}

    private ModelCache(Path root) {
        this.root = root;
    }

    /** The cache at root (one object per folder and JVM). */
    static ModelCache of(Path root) {
        return CACHES.computeIfAbsent(root.toAbsolutePath().normalize(), ModelCache::new);
    }

    Path root() {
        return root;
    }

    /**
     * Leases the copy of hash to this JVM until it exits (again: nothing). The first lease also sweeps the cache of copies
     * unused for longer than maxUnusedAge, and arranges for this JVM's copies to go at its exit when maxUnusedAge is 0.
     */
    void lease(String hash, Duration maxUnusedAge) throws IOException {
        if (held.containsKey(hash)) {
            return;
        }
        synchronized (this) {
            if (held.containsKey(hash)) {
                return;
            }
            Files.createDirectories(root.resolve(LEASES));
            Path file = leaseFile(hash);
            FileChannel ch = FileChannel.open(
                    file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
            FileLock lock;
            try {
                // Before the lock: setting the time opens and closes the file, which would drop it.
                Files.setLastModifiedTime(file, FileTime.from(Instant.now()));
                lock = ch.lock(0, Long.MAX_VALUE, true); // waits while a sweep holds it to remove the copy
            } catch (IOException | RuntimeException e) {
                ch.close();
                throw e;
            }
            held.put(hash, new Lease(ch, lock));
            if (exitAge == null) {
                exitAge = maxUnusedAge;
                Runtime.getRuntime().addShutdownHook(new Thread(this::release, "scorch-model-cache-release"));
            }
        }
        if (!swept) {
            swept = true;
            sweep(maxUnusedAge, Instant.now());
        }
    }

    /** Whether this JVM leases the copy of hash. */
    boolean leases(String hash) {
        return held.containsKey(hash);
    }

    /** Runs body under this host's exclusive lock for assembling the copy of hash (one thread of one JVM at a time). */
    <T> T assembling(String hash, IoSupplier<T> body) throws IOException {
        synchronized (assembling.computeIfAbsent(hash, h -> new Object())) {
            Files.createDirectories(root.resolve(LEASES));
            try (FileChannel ch = FileChannel.open(
                            root.resolve(LEASES).resolve(hash + ".assemble"),
                            StandardOpenOption.CREATE,
                            StandardOpenOption.WRITE);
                    FileLock l = lockLogged(ch, hash)) {
                return body.get();
            }
        }
    }

    /**
     * The exclusive lock on ch, logging when another JVM of this host holds it (it is copying the model: this one waits
     * and then maps its copy). The OS drops a lock when its process dies, so a dead JVM's lock never blocks anyone.
     */
    private FileLock lockLogged(FileChannel ch, String hash) throws IOException {
        FileLock l = ch.tryLock();
        if (l != null) {
            return l;
        }
        long t0 = System.nanoTime();
        LOG.info(
                "scorch model cache {}: another executor of this host is assembling model {}; waiting for its copy",
                root,
                hash.substring(0, 12));
        l = ch.lock();
        LOG.info(
                "scorch model cache {}: waited {} s for model {}",
                root,
                String.format("%.1f", (System.nanoTime() - t0) / 1e9),
                hash.substring(0, 12));
        return l;
    }

    /**
     * Removes hash's temporary folders; call it only under {@link #assembling}'s lock, where any such folder was left by a
     * JVM that died (or failed) while assembling. Returns how many it removed.
     */
    int removeTemporaries(String hash) throws IOException {
        int n = 0;
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                Matcher t = TEMPORARY.matcher(p.getFileName().toString());
                if (t.matches() && t.group(1).equals(hash) && Files.isDirectory(p)) {
                    LOG.info(
                            "scorch model cache {}: removing {}, a copy of model {} cut short",
                            root,
                            p.getFileName(),
                            hash.substring(0, 12));
                    LocalModelFolder.delete(p);
                    n++;
                }
            }
        }
        return n;
    }

    interface IoSupplier<T> {
        T get() throws IOException;
    }

    /**
     * Makes sure bytes fit in the cache's file system, removing copies nobody leases (least recently used first) when they do
     * not; throws naming the folder, the bytes needed and the bytes free when they still do not.
     */
    void ensureRoom(long bytes, String what) throws IOException {
        ensureRoom(bytes, what, () -> usableSpace(root));
    }

    void ensureRoom(long bytes, String what, LongSupplier usable) throws IOException {
        if (usable.getAsLong() >= bytes) {
            return;
        }
        for (Unused u : unused()) {
            if (remove(u, Instant.MAX) && usable.getAsLong() >= bytes) {
                return;
            }
        }
        long free = usable.getAsLong();
        if (free < bytes) {
            throw new CheckpointException("model cache " + root + ": " + what + " needs " + bytes + " bytes ("
                    + gib(bytes) + ") but only "
                    + free + " bytes (" + gib(free) + ") are free there, with no unused copies left to remove; set "
                    + ExecutorModelCache.DIR_CONF + " (or $" + ExecutorModelCache.DIR_ENV
                    + ") to a folder with room, or use --weights shared-path with a folder every executor sees at the same"
                    + " path (mapped in place, not copied)");
        }
    }

    private static long usableSpace(Path p) {
        try {
            return Files.getFileStore(p).getUsableSpace();
        } catch (IOException e) {
            throw new UncheckedIOException(p + ": cannot read the free space: " + e.getMessage(), e);
        }
    }

    private static String gib(long bytes) {
        return String.format("%.2f GiB", bytes / (double) (1L << 30));
    }

    /** Removes the copies nobody leases that were last used before now - maxUnusedAge. Returns how many it removed. */
    int sweep(Duration maxUnusedAge, Instant now) throws IOException {
        Instant cutoff = now.minus(maxUnusedAge);
        int n = 0;
        for (Unused u : unused()) {
            if (remove(u, cutoff)) {
                n++;
            }
        }
        try (Stream<Path> s = Files.list(root)) { // temporary folders of older versions, which took no leases
            for (Path p : s.toList()) {
                if (OLD_TEMPORARY.matcher(p.getFileName().toString()).matches()
                        && Files.getLastModifiedTime(p).toInstant().isBefore(cutoff)) {
                    LocalModelFolder.delete(p);
                    n++;
                }
            }
        }
        return n;
    }

    /** A model's folders in the cache, none leased by this JVM, with when it was last used. */
    private record Unused(String hash, List<Path> folders, Instant lastUsed) {}

    /** The models with folders here that this JVM does not lease, least recently used first. */
    private List<Unused> unused() throws IOException {
        Map<String, List<Path>> byHash = new TreeMap<>();
        if (!Files.isDirectory(root)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                String name = p.getFileName().toString();
                Matcher t = TEMPORARY.matcher(name);
                String hash = null;
                if (COPY.matcher(name).matches() && isOurs(p, name)) {
                    hash = name;
                } else if (t.matches() && Files.isDirectory(p)) {
                    hash = t.group(1);
                }
                if (hash != null && !held.containsKey(hash)) {
                    byHash.computeIfAbsent(hash, h -> new ArrayList<>()).add(p);
                }
            }
        }
        List<Unused> out = new ArrayList<>();
        for (var e : byHash.entrySet()) {
            out.add(new Unused(e.getKey(), e.getValue(), lastUsed(e.getKey(), e.getValue())));
        }
        out.sort(Comparator.comparing(Unused::lastUsed));
        return out;
    }

    /** A copy Scorch published: a folder whose completion marker holds its name. */
    private static boolean isOurs(Path dir, String hash) {
        try {
            return Files.isDirectory(dir)
                    && hash.equals(Files.readString(dir.resolve(LocalModelFolder.COMPLETE))
                            .trim());
        } catch (IOException e) {
            return false;
        }
    }

    /** When a JVM last took or gave back the model's lease; for copies older than leases, when their folders last changed. */
    private Instant lastUsed(String hash, List<Path> folders) throws IOException {
        try {
            return Files.getLastModifiedTime(leaseFile(hash)).toInstant();
        } catch (NoSuchFileException e) {
            Instant t = Instant.MIN;
            for (Path f : folders) {
                Instant m = Files.getLastModifiedTime(f).toInstant();
                t = m.isAfter(t) ? m : t;
            }
            return t;
        }
    }

    /**
     * Removes u's folders if no process leases the model and it was last used before cutoff (checked again under the
     * exclusive lock, which keeps any JVM from leasing it meanwhile). Returns whether it removed them.
     */
    private synchronized boolean remove(Unused u, Instant cutoff) throws IOException {
        if (held.containsKey(u.hash())) {
            return false; // leased by this JVM since the listing (and a channel opened here would drop that lock when
            // closed)
        }
        Files.createDirectories(root.resolve(LEASES));
        Path file = leaseFile(u.hash());
        boolean existed = Files.exists(file);
        try (FileChannel ch =
                FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            FileLock lock;
            try {
                lock = ch.tryLock();
            } catch (OverlappingFileLockException e) {
                return false; // this JVM took the lease meanwhile
            }
            if (lock == null) {
                return false; // a running JVM uses it
            }
            try {
                Instant last = existed ? Files.getLastModifiedTime(file).toInstant() : u.lastUsed();
                if (!last.isBefore(cutoff)) {
                    return false;
                }
                removeFolders(u.hash());
                return true;
            } finally {
                lock.release();
            }
        }
    }

    /**
     * Deletes hash's copy and temporary folders. The copy is first renamed to a temporary name, so a removal cut short
     * leaves a folder the next sweep finishes, never a marked copy with files missing.
     */
    private void removeFolders(String hash) throws IOException {
        Path copy = root.resolve(hash);
        if (isOurs(copy, hash)) {
            Files.move(copy, root.resolve(hash + PARTIAL + "removed-" + System.nanoTime()));
        }
        try (Stream<Path> s = Files.list(root)) {
            for (Path p : s.toList()) {
                Matcher t = TEMPORARY.matcher(p.getFileName().toString());
                if (t.matches() && t.group(1).equals(hash) && Files.isDirectory(p)) {
                    LocalModelFolder.delete(p);
                }
            }
        }
    }

    private Path leaseFile(String hash) {
        return root.resolve(LEASES).resolve(hash + ".lease");
    }

    /**
     * At exit: marks this JVM's copies as used now and gives back their leases; with a maximum unused age of 0, removes each
     * copy no other process leases.
     */
    private void release() {
        for (var e : held.entrySet()) {
            try {
                FileChannel ch = e.getValue().channel();
                e.getValue().lock().release();
                Files.setLastModifiedTime(leaseFile(e.getKey()), FileTime.from(Instant.now()));
                if (exitAge.isZero()) {
                    FileLock x = ch.tryLock();
                    if (x != null) {
                        removeFolders(e.getKey());
                        x.release();
                    }
                }
                ch.close();
            } catch (IOException | RuntimeException ignored) {
                // the next sweep removes what is left
            }
        }
    }
}
