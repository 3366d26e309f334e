package dev.scorch.udfs.model;

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

  static Path fresh(Path cacheRoot, ModelManifest m) throws IOException {
    Files.createDirectories(cacheRoot);
    return Files.createTempDirectory(cacheRoot, m.shortHash() + ".partial-");
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
      // (AtomicMoveNotSupportedException, FileAlreadyExistsException and DirectoryNotEmptyException are subclasses.)
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
}
