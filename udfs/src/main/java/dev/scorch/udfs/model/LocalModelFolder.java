package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/** A model folder assembled in an executor's cache: written under a temporary name, verified, then renamed. */
final class LocalModelFolder {
    /** Marker written last: a folder without it is incomplete and is assembled again. */
    static final String COMPLETE = ".scorch-complete";

    private LocalModelFolder() {}

    /** Writes a model's files into an empty folder. */
    interface Writer {
        void write(Path folder) throws IOException;
    }

    /**
     * The cache's copy of this model ({@code <cache root>/<content hash>}), assembled by writer when missing. The copy is
     * leased to this JVM; one JVM of the host assembles it while the others wait for it; the room it needs is checked
     * first (unused copies are removed to make it). A failed copy leaves nothing behind.
     */
    static Path assemble(Path cacheRoot, ModelManifest m, Writer writer) {
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
                Path tmp = fresh(cache, m);
                try {
                    writer.write(tmp);
                    Path published = publish(tmp, dir, m);
                    tmp = null;
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
        m.verify(tmp);
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
