package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.atomic.AtomicInteger;

/** A model folder assembled in an executor's cache: written under a temporary name, verified, then renamed. */
final class LocalModelFolder {
    /** Marker written last: a folder without it is incomplete and is assembled again. */
    static final String COMPLETE = ".scorch-complete";

    private static final AtomicInteger COPIES = new AtomicInteger();

    private LocalModelFolder() {}

    /** Writes a model's files into an empty folder. */
    interface Writer {
        void write(Path folder) throws IOException;
    }

    /**
     * The cache's copy of this model ({@code <cache root>/<content hash>}), assembled by writer when missing. The copy is
     * leased to this JVM; one JVM of the host assembles it while the others wait for it; the room it needs is checked
     * first (unused copies are removed to make it). A failed copy leaves nothing behind, and one cut short by a dead JVM
     * is removed by the next to assemble. The folder is verified against the manifest before it is published.
     */
    static Path assemble(Path cacheRoot, ModelManifest m, Writer writer) {
        return assemble(cacheRoot, m, writer, false);
    }

    /**
     * As {@link #assemble(Path, ModelManifest, Writer)}; writerVerifies: the writer checks every file's size and CRC32C
     * against the manifest as it writes it (reading a large copy back once more would double the time it takes).
     */
    static Path assemble(Path cacheRoot, ModelManifest m, Writer writer, boolean writerVerifies) {
        ModelCache cache = ModelCache.of(cacheRoot);
        Path dir = cacheRoot.resolve(m.contentHash());
        try {
            cache.lease(m.contentHash(), ExecutorModelCache.maxUnusedAge());
            if (isComplete(dir)) {
                return dir;
            }
            return cache.assembling(m.contentHash(), () -> {
                if (isComplete(dir)) {
                    return dir; // another JVM of this host made it while this one waited
                }
                // Under the lock nobody else assembles this model: a temporary folder of it is a dead JVM's.
                cache.removeTemporaries(m.contentHash());
                Path tmp = fresh(cache, m);
                try {
                    writer.write(tmp);
                    Path published = publish(tmp, dir, m, !writerVerifies);
                    tmp = null;
                    COPIES.incrementAndGet();
                    return published;
                } finally {
                    deleteQuietly(tmp);
                }
            });
        } catch (IOException e) {
            throw new CheckpointException(
                    dir + ": cannot copy model " + m.name() + " into the model cache: " + e.getMessage(), e);
        }
    }

    /** Copies this JVM has assembled and published (a test hook, and a figure for logs). */
    static int copies() {
        return COPIES.get();
    }

    /**
     * Where the manifest's file name goes in folder, its parent folders made. A name is a relative path from an untrusted
     * checkpoint: one that is absolute or climbs out of the folder is refused.
     */
    static Path target(Path folder, String name) throws IOException {
        Path p = folder.resolve(name).normalize();
        if (Path.of(name).isAbsolute() || !p.startsWith(folder.normalize()) || p.equals(folder.normalize())) {
            throw new CheckpointException("model file name '" + name + "' leaves the model folder");
        }
        Files.createDirectories(p.getParent());
        return p;
    }

    static boolean isComplete(Path dir) {
        return Files.isRegularFile(dir.resolve(COMPLETE));
    }

    /** An empty temporary folder in the cache, once the cache has room for the model's files. */
    static Path fresh(ModelCache cache, ModelManifest m) throws IOException {
        Files.createDirectories(cache.root());
        cache.ensureRoom(m.totalBytes(), "model " + m.name() + "@" + m.shortHash());
        return Files.createTempDirectory(cache.root(), m.contentHash() + ModelCache.PARTIAL);
    }

    /** Verifies tmp against the manifest and moves it to dir (another task may have won the race: then tmp is dropped). */
    static Path publish(Path tmp, Path dir, ModelManifest m) throws IOException {
        return publish(tmp, dir, m, true);
    }

    /** As {@link #publish(Path, Path, ModelManifest)}, reading the files back to verify them only when verify is set. */
    static Path publish(Path tmp, Path dir, ModelManifest m, boolean verify) throws IOException {
        if (verify) {
            m.verify(tmp);
        } else {
            for (ModelManifest.FileEntry e : m.files()) {
                Path p = tmp.resolve(e.name());
                if (!Files.isRegularFile(p) || Files.size(p) != e.size()) {
                    throw new CheckpointException(p + ": missing or not " + e.size() + " bytes as the manifest says");
                }
            }
        }
        Files.writeString(tmp.resolve(COMPLETE), m.contentHash());
        try {
            Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
        } catch (java.nio.file.FileSystemException e) {
            // Another JVM on this host published first: rename(2) onto its non-empty folder fails with ENOTEMPTY, which
            // Java reports as a plain FileSystemException ("Directory not empty"), not DirectoryNotEmptyException.
            // (AtomicMoveNotSupportedException, FileAlreadyExistsException and DirectoryNotEmptyException are
            // subclasses.)
            if (!Files.isRegularFile(dir.resolve(COMPLETE))) {
                throw e;
            }
            delete(tmp);
        }
        return dir;
    }

    static void delete(Path p) throws IOException {
        try (var s = Files.walk(p)) {
            for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        }
    }

    /** Deletes p (null: nothing) if it can; a leftover temporary folder is removed by a later sweep of the cache. */
    static void deleteQuietly(Path p) {
        if (p == null || !Files.exists(p)) {
            return;
        }
        try {
            delete(p);
        } catch (IOException ignored) {
            // swept later
        }
    }
}
