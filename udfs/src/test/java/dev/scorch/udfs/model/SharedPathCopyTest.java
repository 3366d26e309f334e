package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.udfs.api.ApiTests;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * shared-path's host copies through Hadoop's FileSystem (file: here, as hdfs:// or s3a:// would be): one copy per host
 * whoever asks at once (threads of one JVM, Spark tasks, other JVMs), checked file by file, a copy cut short by a killed
 * JVM recovered, and a local folder mapped in place unless told to copy.
 */
@Timeout(180)
class SharedPathCopyTest {
    @TempDir
    static Path shared;

    @TempDir
    Path tmp;

    static Path model;
    static ModelManifest manifest;

    final List<Process> children = new ArrayList<>();

    @BeforeAll
    static void writeModel() throws IOException {
        model = shared.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(model);
        manifest = ModelManifest.of(model);
    }

    @AfterEach
    void killChildren() {
        children.forEach(Process::destroyForcibly);
    }

    /** Hadoop's local file system, each open(2) taking 300 ms: a copy slow enough that others come while it runs. */
    public static final class SlowLocalFileSystem extends LocalFileSystem {
        @Override
        public FSDataInputStream open(org.apache.hadoop.fs.Path f, int bufferSize) throws IOException {
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException(e);
            }
            return super.open(f, bufferSize);
        }
    }

    static Configuration slowFiles() {
        Configuration c = new Configuration();
        c.set("fs.file.impl", SlowLocalFileSystem.class.getName());
        c.setBoolean("fs.file.impl.disable.cache", true);
        return c;
    }

    static SharedPathSource fileUri(Path dir, ModelManifest m) {
        return new SharedPathSource(dir.toUri().toString(), m);
    }

    static List<String> names(Path root) throws IOException {
        try (Stream<Path> s = Files.list(root)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void aFileUriIsCopiedOnceThroughHadoopFileSystemIntoTheCache() throws IOException {
        Path root = tmp.resolve("cache");
        SharedPathSource s = fileUri(model, manifest);
        assertTrue(s.uri().startsWith("file:/"), s.uri());
        int copies = LocalModelFolder.copies();
        Path dir = s.materialize(root, true, 2, new Configuration());
        assertEquals(root.resolve(manifest.contentHash()), dir);
        assertEquals(copies + 1, LocalModelFolder.copies());
        manifest.verify(dir);
        assertEquals(manifest.contentHash(), Files.readString(dir.resolve(LocalModelFolder.COMPLETE)));
        assertEquals(List.of(manifest.contentHash(), ModelCache.LEASES), names(root), "no temporary folder left");

        assertEquals(dir, s.materialize(root, true, 2, new Configuration()));
        assertEquals(copies + 1, LocalModelFolder.copies(), "the second load reuses the copy");
    }

    @Test
    void aLocalFolderIsMappedInPlaceUnlessToldToCopy() {
        Path root = tmp.resolve("cache");
        assertEquals(
                model,
                new SharedPathSource(model.toString(), manifest).materialize(root, false, 2, new Configuration()));
        assertEquals(model, fileUri(model, manifest).materialize(root, false, 2, new Configuration()));
        assertFalse(Files.exists(root), "nothing copied, nothing in the cache");
    }

    @Test
    void aFolderAnExecutorDoesNotSeeSaysWhatSharedPathNeeds() {
        Path gone = tmp.resolve("not-mounted-here");
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> new SharedPathSource(gone.toString(), manifest)
                        .materialize(tmp.resolve("c"), false, 1, new Configuration()));
        assertTrue(e.getMessage().startsWith(gone + ": model model is not there on executor host "), e.getMessage());
        assertTrue(e.getMessage().contains("every executor to see the folder at the driver's path"), e.getMessage());
    }

    @Test
    void aSourceFileChangedSinceTheDriverCheckedItIsNotPublished() throws IOException {
        Path changed = tmp.resolve("changed");
        Files.createDirectories(changed);
        for (ModelManifest.FileEntry e : manifest.files()) {
            Files.createDirectories(changed.resolve(e.name()).getParent());
            Files.copy(model.resolve(e.name()), changed.resolve(e.name()));
        }
        ModelManifest.FileEntry shard = manifest.files().stream()
                .filter(e -> e.name().endsWith(".safetensors"))
                .findFirst()
                .orElseThrow();
        byte[] b = Files.readAllBytes(changed.resolve(shard.name()));
        b[b.length - 1] ^= 1; // same size, one bit flipped in the last weight
        Files.write(changed.resolve(shard.name()), b);

        Path root = tmp.resolve("cache");
        CheckpointException e = assertThrows(
                CheckpointException.class,
                () -> fileUri(changed, manifest).materialize(root, true, 2, new Configuration()));
        assertTrue(e.getMessage().contains(shard.name() + ": checksum "), e.getMessage());
        assertTrue(
                e.getMessage().contains("differs from the manifest's " + Long.toHexString(shard.crc32c())),
                e.getMessage());
        assertEquals(List.of(ModelCache.LEASES), names(root), "neither a copy nor a temporary folder left");
    }

    @Test
    void aFileNameThatLeavesTheFolderIsRefused() throws IOException {
        Path root = tmp.resolve("cache");
        Files.writeString(shared.resolve("outside.bin"), "x");
        ModelManifest evil =
                new ModelManifest("evil", List.of(new ModelManifest.FileEntry("../outside.bin", 1, 0)), "e".repeat(64));
        CheckpointException e = assertThrows(
                CheckpointException.class, () -> fileUri(model, evil).materialize(root, true, 1, new Configuration()));
        assertEquals("model file name '../outside.bin' leaves the model folder", e.getMessage());
        assertEquals(List.of(ModelCache.LEASES), names(root));
    }

    /** Two Spark tasks of one executor ask at once: one copies, the other waits for it and maps the same folder. */
    @Test
    void twoConcurrentSparkTasksMakeOneCopy() {
        String root = tmp.resolve("cache").toString();
        SharedPathSource s = fileUri(model, manifest);
        int copies = LocalModelFolder.copies();
        JavaSparkContext jsc =
                JavaSparkContext.fromSparkContext(ApiTests.spark().sparkContext());
        List<String> dirs = jsc.parallelize(List.of(0, 1), 2)
                .map(i -> s.materialize(Path.of(root), true, 1, slowFiles()).toString())
                .collect();
        assertEquals(
                List.of(
                        Path.of(root, manifest.contentHash()).toString(),
                        Path.of(root, manifest.contentHash()).toString()),
                dirs);
        assertEquals(copies + 1, LocalModelFolder.copies(), "one copy between the two tasks");
    }

    /** Another JVM: "copy ROOT MODEL GO" or "die ROOT MODEL" ({@link CacheChild#main}). */
    Process child(String... args) throws IOException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", cp, CacheChild.class.getName()));
        cmd.addAll(Arrays.asList(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        children.add(p);
        return p;
    }

    /** The child's first output line that starts with prefix (its logs are skipped). */
    static String lineStarting(Process p, String prefix) throws IOException, InterruptedException {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        StringBuilder seen = new StringBuilder();
        for (String line = r.readLine(); line != null; line = r.readLine()) {
            if (line.startsWith(prefix)) {
                return line;
            }
            seen.append(line).append('\n');
        }
        throw new AssertionError(
                "the child exited with " + p.waitFor(10, TimeUnit.SECONDS) + " before '" + prefix + "':\n" + seen);
    }

    static Map<String, String> fields(String line) {
        Map<String, String> m = new HashMap<>();
        for (String kv : line.split(" ")) {
            int i = kv.indexOf('=');
            if (i > 0) {
                m.put(kv.substring(0, i), kv.substring(i + 1));
            }
        }
        return m;
    }

    /** Two executor JVMs of one host load at once: exactly one copies; the other waits on the lock and maps its copy. */
    @Test
    void twoExecutorJvmsOnOneHostMakeOneCopy() throws Exception {
        Path root = tmp.resolve("cache");
        Path go = tmp.resolve("go");
        Process a = child("copy", root.toString(), model.toString(), go.toString());
        Process b = child("copy", root.toString(), model.toString(), go.toString());
        Thread.sleep(500);
        Files.createFile(go);
        Map<String, String> ra = fields(lineStarting(a, "done "));
        Map<String, String> rb = fields(lineStarting(b, "done "));
        String dir = root.resolve(manifest.contentHash()).toString();
        assertEquals(dir, ra.get("dir"));
        assertEquals(dir, rb.get("dir"));
        assertEquals(1, Integer.parseInt(ra.get("copies")) + Integer.parseInt(rb.get("copies")), ra + " " + rb);
        Map<String, String> copier = ra.get("copies").equals("1") ? ra : rb;
        Map<String, String> waiter = copier == ra ? rb : ra;
        assertTrue(
                Long.parseLong(waiter.get("start")) < Long.parseLong(copier.get("end")),
                "the second asked while the first was copying, so it waited: " + ra + " " + rb);
        manifest.verify(Path.of(dir));
        assertEquals(List.of(manifest.contentHash(), ModelCache.LEASES), names(root));
    }

    /**
     * A JVM killed while copying leaves its lock (dropped by the OS) and a partial file: a loader that was waiting on the
     * lock takes over, removes the partial copy and makes a whole one.
     */
    @Test
    void aCopyCutShortByAKilledJvmIsRecovered() throws Exception {
        Path root = tmp.resolve("cache");
        Process dying = child("die", root.toString(), model.toString());
        String partial = fields(lineStarting(dying, "partial ")).get("tmp");
        assertTrue(Files.isDirectory(Path.of(partial)), partial);

        int copies = LocalModelFolder.copies();
        CompletableFuture<Path> load = CompletableFuture.supplyAsync(
                () -> fileUri(model, manifest).materialize(root, true, 2, new Configuration()));
        assertThrows(
                TimeoutException.class,
                () -> load.get(2, TimeUnit.SECONDS),
                "waits while the live copier holds the lock");

        dying.destroyForcibly().waitFor();
        Path dir = load.get(60, TimeUnit.SECONDS);
        assertEquals(root.resolve(manifest.contentHash()), dir);
        assertEquals(copies + 1, LocalModelFolder.copies());
        manifest.verify(dir);
        assertFalse(Files.exists(Path.of(partial)), "the dead JVM's partial copy is removed");
        assertEquals(List.of(manifest.contentHash(), ModelCache.LEASES), names(root));
    }

    /** The other JVMs of {@link #child}. */
    public static final class CacheChild {
        public static void main(String[] args) throws Exception {
            Path root = Path.of(args[1]);
            Path dir = Path.of(args[2]);
            ModelManifest m = ModelManifest.of(dir);
            if (args[0].equals("copy")) {
                Path go = Path.of(args[3]);
                while (!Files.exists(go)) {
                    Thread.sleep(5);
                }
                long start = System.currentTimeMillis();
                Path got = fileUri(dir, m).materialize(root, true, 1, slowFiles());
                long end = System.currentTimeMillis();
                System.out.println(
                        "done start=" + start + " end=" + end + " copies=" + LocalModelFolder.copies() + " dir=" + got);
                System.out.flush();
                return;
            }
            // die: take the lock, write part of the largest file, say so, and wait to be killed.
            ModelCache cache = ModelCache.of(root);
            cache.lease(m.contentHash(), Duration.ofHours(1));
            cache.assembling(m.contentHash(), () -> {
                Path t = LocalModelFolder.fresh(cache, m);
                ModelManifest.FileEntry big = m.files().stream()
                        .max((x, y) -> Long.compare(x.size(), y.size()))
                        .orElseThrow();
                try (OutputStream out = Files.newOutputStream(LocalModelFolder.target(t, big.name()))) {
                    out.write(Files.readAllBytes(dir.resolve(big.name())), 0, (int) (big.size() / 2));
                }
                System.out.println("partial tmp=" + t);
                System.out.flush();
                try {
                    Thread.sleep(600_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return null;
            });
        }
    }
}
