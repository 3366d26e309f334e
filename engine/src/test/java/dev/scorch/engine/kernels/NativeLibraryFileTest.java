package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.scorch.engine.testing.ChildJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where the native library is loaded from: one file per content, reused by every JVM of the user, none left behind. */
class NativeLibraryFileTest {
    @TempDir
    Path tmp;

    private static List<Path> list(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.sorted().toList();
        }
    }

    private static byte[] library(int seed) {
        byte[] b = new byte[100_000];
        new java.util.Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void crashedJvmsLeaveNoCopiesAndShareOneCachedFile() throws Exception {
        assumeTrue(NativeCpu.available(), "native library: " + NativeCpu.status());
        Path tmpDir = Files.createDirectories(tmp.resolve("tmp"));
        Path home = Files.createDirectories(tmp.resolve("home"));
        Map<String, String> env = new HashMap<>();
        env.put("XDG_CACHE_HOME", null);
        List<String> jvm = List.of("-Djava.io.tmpdir=" + tmpDir, "-Duser.home=" + home);
        Path cache = home.resolve(".cache/scorch/native");
        Object firstKey = null;
        for (int run = 0; run < 2; run++) {
            ChildJvm.Result r = ChildJvm.run(NativeLibraryProbe.class, jvm, env, 120);
            assertEquals(0, r.exitCode(), r.output());
            assertTrue(r.output().contains("status=loaded"), r.output());
            assertEquals(
                    List.of(), list(tmpDir), "a JVM that ends without its exit hooks leaves nothing in java.io.tmpdir");
            List<Path> cached = list(cache);
            assertEquals(1, cached.size(), "one library file in the cache: " + cached);
            assertTrue(
                    cached.get(0).getFileName().toString().matches("libscorch_cpu-[0-9a-f]{16}\\.so"),
                    cached.toString());
            Object key = Files.readAttributes(cached.get(0), BasicFileAttributes.class)
                    .fileKey();
            if (run == 0) {
                firstKey = key;
            } else {
                assertEquals(firstKey, key, "the second JVM loaded the first one's file, not a copy of its own");
            }
        }
    }

    @Test
    void sameContentSameFileAndADamagedFileIsWrittenAgain() throws IOException {
        Path dir = tmp.resolve("cache");
        byte[] lib = library(1);
        Path a = NativeLibraryFile.cached(lib, dir, "libscorch_cpu");
        Path b = NativeLibraryFile.cached(lib, dir, "libscorch_cpu");
        assertEquals(a, b);
        assertEquals(List.of(a), list(dir));
        assertArrayEquals(lib, Files.readAllBytes(a));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));

        Path other = NativeLibraryFile.cached(library(2), dir, "libscorch_cpu");
        assertTrue(!other.equals(a), "other content, other file");

        Files.write(a, new byte[] {1, 2, 3}); // a truncated or damaged copy
        assertEquals(a, NativeLibraryFile.cached(lib, dir, "libscorch_cpu"));
        assertArrayEquals(lib, Files.readAllBytes(a), "written again from the jar's bytes");
        assertEquals(2, list(dir).size(), "no temporary files left: " + list(dir));
    }

    @Test
    void concurrentWritersAgreeOnOneCompleteFile() throws Exception {
        Path dir = tmp.resolve("cache");
        byte[] lib = library(3);
        ExecutorService pool = Executors.newFixedThreadPool(8);
        try {
            List<Callable<Path>> calls = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                calls.add(() -> {
                    Path p = NativeLibraryFile.cached(lib, dir, "libscorch_cpu");
                    assertArrayEquals(lib, Files.readAllBytes(p), "every caller sees the whole file");
                    return p;
                });
            }
            Set<Path> seen = new HashSet<>();
            for (Future<Path> f : pool.invokeAll(calls)) {
                seen.add(f.get());
            }
            assertEquals(1, seen.size());
            assertEquals(List.copyOf(seen), list(dir));
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void aCacheFolderOfSomeoneElseOrALinkIsNotUsed() throws IOException {
        Path real = Files.createDirectories(tmp.resolve("real"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        Path p = NativeLibraryFile.cached(library(4), link, "libscorch_cpu");
        assertTrue(!p.startsWith(link) && !p.startsWith(real), "a linked folder is not trusted: " + p);
        Files.deleteIfExists(p);
        Path open = Files.createDirectories(tmp.resolve("open"));
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
        Path q = NativeLibraryFile.cached(library(4), open, "libscorch_cpu");
        assertTrue(!q.startsWith(open), "a folder others can write is not trusted: " + q);
        Files.deleteIfExists(q);
    }

    @Test
    void copiesOlderVersionsLeftInTheTempFolderAreRemoved() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("t"));
        Path old1 = Files.createFile(dir.resolve("scorch_cpu8812345507712.so"));
        Path old2 = Files.createFile(dir.resolve("scorch_cpu1.so"));
        Path keep1 = Files.createFile(dir.resolve("scorch_cpu-notours.so"));
        Path keep2 = Files.createFile(dir.resolve("libother.so"));
        assertEquals(2, NativeLibraryFile.removeOldTempCopies(dir, Files.getOwner(dir)));
        assertEquals(List.of(keep2, keep1), list(dir));
        assertTrue(!Files.exists(old1) && !Files.exists(old2));
    }
}
