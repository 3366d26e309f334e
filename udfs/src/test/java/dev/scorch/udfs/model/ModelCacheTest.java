package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The model cache's housekeeping, with other JVMs as the other executors of a host: a copy a live process leases is
 * never removed, one nobody leases goes once unused for the configured age (at once after SIGKILL of its user), room is
 * made least recently used first, a copy that does not fit is refused before anything is written, and nothing Scorch
 * did not write is touched.
 */
@Timeout(120)
class ModelCacheTest {
    @TempDir
    Path tmp;

    final List<Process> children = new ArrayList<>();

    @AfterEach
    void killChildren() {
        children.forEach(Process::destroyForcibly);
    }

    static String hash(char c) {
        return String.valueOf(c).repeat(64);
    }

    /** A published copy: a folder named by the hash with a file of size bytes and the completion marker. */
    static Path copy(Path root, String hash, int size) throws IOException {
        Path d = Files.createDirectories(root.resolve(hash));
        Files.write(d.resolve("model.safetensors"), new byte[size]);
        Files.writeString(d.resolve(LocalModelFolder.COMPLETE), hash);
        return d;
    }

    /** Sets when the model of hash was last used (its lease file's time). */
    static void lastUsed(Path root, String hash, Duration ago) throws IOException {
        Path f = Files.createDirectories(root.resolve(ModelCache.LEASES)).resolve(hash + ".lease");
        if (!Files.exists(f)) {
            Files.createFile(f);
        }
        Files.setLastModifiedTime(f, FileTime.from(Instant.now().minus(ago)));
    }

    /** Another JVM that leases hash in root (maxUnusedAge given), runs, and prints "leased" once it holds the lease. */
    Process leaseHolder(Path root, String hash, String maxUnusedAge, String then)
            throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Process p = new ProcessBuilder(
                        java, "-cp", cp, LeaseHolder.class.getName(), root.toString(), hash, maxUnusedAge, then)
                .redirectErrorStream(true)
                .start();
        children.add(p);
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        for (String line = r.readLine(); line != null; line = r.readLine()) {
            if (line.equals("leased")) {
                return p;
            }
        }
        throw new AssertionError("the lease holder exited with " + p.waitFor(10, TimeUnit.SECONDS) + " before leasing");
    }

    /** The other JVM: leases args[1] in cache root args[0] with maxUnusedAge args[2], then sleeps or exits (args[3]). */
    public static final class LeaseHolder {
        public static void main(String[] args) throws Exception {
            Path root = Path.of(args[0]);
            ModelCache.of(root).lease(args[1], Duration.parse(args[2]));
            System.out.println("leased");
            System.out.flush();
            if (args[3].equals("sleep")) {
                Thread.sleep(600_000);
            }
        }
    }

    static List<String> names(Path root) throws IOException {
        try (Stream<Path> s = Files.list(root)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void aCopyNobodyLeasesGoesOnceUnusedForTheAgeAndOnlyScorchsFoldersAreTouched() throws Exception {
        Path root = tmp.resolve("cache");
        String old = hash('a');
        String leased = hash('b');
        String recent = hash('c');
        copy(root, old, 10);
        copy(root, leased, 10);
        copy(root, recent, 10);
        Files.createDirectories(root.resolve(old + ".partial-123")); // a copy cut short
        lastUsed(root, old, Duration.ofHours(3));
        lastUsed(root, recent, Duration.ofMinutes(5));
        // Not Scorch's: a user's file, a hash-named folder without our marker, one whose marker names another hash.
        Files.writeString(root.resolve("notes.txt"), "mine");
        Files.createDirectories(root.resolve(hash('d'))).resolve("x").toFile().createNewFile();
        Files.writeString(
                Files.createDirectories(root.resolve(hash('e'))).resolve(LocalModelFolder.COMPLETE), hash('f'));
        Files.createDirectories(root.resolve("tokenizers").resolve(hash('a')));

        Process holder = leaseHolder(root, leased, "P3650D", "sleep");
        lastUsed(root, leased, Duration.ofHours(3)); // leased long ago, still in use

        ModelCache cache = ModelCache.of(root);
        assertEquals(1, cache.sweep(Duration.ofHours(1), Instant.now()), "the old copy, with its cut-short folder");
        assertEquals(
                List.of(hash('b'), hash('c'), hash('d'), hash('e'), "leases", "notes.txt", "tokenizers"), names(root));

        // SIGKILL: the OS drops the dead JVM's lock, and the copy it leased is unused.
        holder.destroyForcibly().waitFor();
        assertEquals(1, cache.sweep(Duration.ofHours(1), Instant.now()));
        assertFalse(Files.exists(root.resolve(leased)));
        assertTrue(Files.exists(root.resolve(recent)), "used 5 minutes ago: kept for reuse");
        assertEquals(1, cache.sweep(Duration.ZERO, Instant.now()));
        assertEquals(List.of(hash('d'), hash('e'), "leases", "notes.txt", "tokenizers"), names(root));
        assertEquals("mine", Files.readString(root.resolve("notes.txt")));
    }

    @Test
    void theFirstLeaseOfAJvmSweepsAndACopyThisJvmLeasesIsKept() throws Exception {
        Path root = tmp.resolve("cache");
        String mine = hash('1');
        String old = hash('2');
        copy(root, mine, 10);
        copy(root, old, 10);
        lastUsed(root, mine, Duration.ofDays(2));
        lastUsed(root, old, Duration.ofDays(2));
        ModelCache cache = ModelCache.of(root);
        cache.lease(mine, Duration.ofHours(1));
        assertTrue(cache.leases(mine));
        assertTrue(Files.exists(root.resolve(mine)), "leased before the sweep");
        assertFalse(Files.exists(root.resolve(old)), "swept at the first lease");
        assertEquals(0, cache.sweep(Duration.ZERO, Instant.now()), "this JVM's own lease keeps its copy");
    }

    @Test
    void roomIsMadeLeastRecentlyUsedFirstAndACopyThatCannotFitIsRefused() throws Exception {
        Path root = tmp.resolve("cache");
        String oldest = hash('3');
        String older = hash('4');
        String mine = hash('5');
        copy(root, oldest, 300);
        copy(root, older, 300);
        copy(root, mine, 300);
        lastUsed(root, oldest, Duration.ofMinutes(30));
        lastUsed(root, older, Duration.ofMinutes(10));
        ModelCache cache = ModelCache.of(root);
        cache.lease(mine, Duration.ofHours(1)); // recent copies: the sweep keeps them all
        assertEquals(3, names(root).stream().filter(n -> n.length() == 64).count());

        long capacity = 1000; // a disk of 1000 bytes, 900 of them used
        java.util.function.LongSupplier free = () -> capacity - bytesUnder(root);
        cache.ensureRoom(350, "model x", free);
        assertFalse(Files.exists(root.resolve(oldest)), "least recently used: removed first");
        assertTrue(Files.exists(root.resolve(older)), "one copy was enough room");

        CheckpointException e =
                assertThrows(CheckpointException.class, () -> cache.ensureRoom(900, "model big@0123456789ab", free));
        String m = e.getMessage();
        assertTrue(m.contains("model cache " + root), m);
        assertTrue(m.contains("model big@0123456789ab needs 900 bytes"), m);
        assertTrue(m.contains("only 700 bytes"), m); // the other unused copy went too; this JVM's stays
        assertTrue(m.contains(ExecutorModelCache.DIR_CONF) && m.contains(ExecutorModelCache.DIR_ENV), m);
        assertTrue(Files.exists(root.resolve(mine)));
    }

    static long bytesUnder(Path root) {
        try (Stream<Path> s = Files.walk(root)) {
            return s.filter(Files::isRegularFile)
                    .filter(p -> p.getFileName().toString().endsWith(".safetensors"))
                    .mapToLong(p -> p.toFile().length())
                    .sum();
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void aModelLargerThanTheFreeSpaceFailsBeforeAnythingIsWritten() {
        Path root = tmp.resolve("cache");
        long petabyte = 1L << 50;
        ModelManifest huge = new ModelManifest(
                "huge", List.of(new ModelManifest.FileEntry("model.safetensors", petabyte, 0)), hash('9'));
        AtomicBoolean wrote = new AtomicBoolean();
        CheckpointException e = assertThrows(
                CheckpointException.class, () -> LocalModelFolder.assemble(root, huge, d -> wrote.set(true)));
        String m = e.getMessage();
        assertTrue(m.contains("model cache " + root.toAbsolutePath()), m);
        assertTrue(m.contains("model huge@999999999999 needs " + petabyte + " bytes (1048576.00 GiB)"), m);
        assertTrue(m.matches("(?s).*only \\d+ bytes \\(\\d+\\.\\d\\d GiB\\) are free.*"), m);
        assertFalse(wrote.get(), "nothing was written");
        assertFalse(Files.exists(root.resolve(hash('9'))));
    }

    @Test
    void withAgeZeroTheLastUserRemovesTheCopyAtExit() throws Exception {
        Path root = tmp.resolve("cache");
        String h = hash('7');
        copy(root, h, 10);
        Process keeper = leaseHolder(root, h, "PT1H", "exit");
        assertEquals(0, keeper.waitFor());
        assertTrue(Files.exists(root.resolve(h)), "a positive age keeps it for reuse");

        Process other = leaseHolder(root, h, "PT1H", "sleep"); // another user still runs
        Process last = leaseHolder(root, h, "PT0S", "exit");
        assertEquals(0, last.waitFor());
        assertTrue(Files.exists(root.resolve(h)), "still leased by the other JVM");
        other.destroy(); // SIGTERM: its exit hook runs with age 1 hour
        other.waitFor();
        Process again = leaseHolder(root, h, "PT0S", "exit");
        assertEquals(0, again.waitFor());
        assertFalse(Files.exists(root.resolve(h)), "the last user with age 0 removed it at exit");
    }

    /**
     * A dead JVM's half-written copy of the model being assembled goes; another model's copy, a user's folder named like
     * one and a plain file stay.
     */
    @Test
    void onlyThisModelsTemporaryFoldersAreRemoved() throws Exception {
        Path root = tmp.resolve("temporaries");
        Files.createDirectories(root);
        String hash = "a".repeat(64);
        String other = "b".repeat(64);
        Path cut = Files.createDirectories(root.resolve(hash + ".partial-123"));
        Files.writeString(cut.resolve("model-00001-of-00001.safetensors"), "half");
        Path otherModel = Files.createDirectories(root.resolve(other + ".partial-9"));
        Path users = Files.createDirectories(root.resolve("notes.partial-1"));
        Path file = Files.writeString(root.resolve(hash + ".partial-file"), "not a folder");
        assertEquals(1, ModelCache.of(root).removeTemporaries(hash));
        assertFalse(Files.exists(cut));
        assertTrue(Files.isDirectory(otherModel));
        assertTrue(Files.isDirectory(users));
        assertEquals("not a folder", Files.readString(file));
    }
}
