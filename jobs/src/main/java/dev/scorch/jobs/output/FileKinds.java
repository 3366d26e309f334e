package dev.scorch.jobs.output;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Scorch replaces or deletes only regular files and folders: never a device node, a FIFO, a socket or a symbolic link
 * (whatever it points to), at the output path or anywhere inside a folder it would delete. Hadoop's local file system
 * reports a device as a file, so local paths are looked at with {@code java.nio}, links not followed.
 */
public final class FileKinds {
    private FileKinds() {}

    /** Throws, naming the path and what it is, when path exists and is not a regular file or folder. */
    public static void requireFileOrFolder(String option, java.nio.file.Path path) {
        BasicFileAttributes a = attributes(path);
        if (a != null && !a.isRegularFile() && !a.isDirectory()) {
            throw refuse(option, path, path, a);
        }
    }

    /**
     * Throws when path, or anything under it, is neither a regular file nor a folder: checked before Scorch replaces or
     * deletes it. On file systems other than the local one (HDFS, object stores) there are no such entries to find.
     */
    public static void requireOnlyFilesAndFolders(FileSystem fs, Path path, String option, String shown)
            throws IOException {
        if (!isLocal(fs)) {
            return;
        }
        java.nio.file.Path root = java.nio.file.Path.of(fs.makeQualified(path).toUri());
        BasicFileAttributes top = attributes(root);
        if (top == null) {
            return;
        }
        if (!top.isDirectory()) {
            if (!top.isRegularFile()) {
                throw refuse(option, java.nio.file.Path.of(shown), root, top);
            }
            return;
        }
        Files.walkFileTree(root, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(java.nio.file.Path f, BasicFileAttributes a) {
                if (!a.isRegularFile() && !a.isDirectory()) {
                    throw refuse(option, java.nio.file.Path.of(shown), f, a);
                }
                return FileVisitResult.CONTINUE;
            }
        });
    }

    private static IllegalArgumentException refuse(
            String option, java.nio.file.Path shown, java.nio.file.Path entry, BasicFileAttributes a) {
        String what = a.isSymbolicLink() ? "a symbolic link" : "a device, FIFO or socket (not a regular file)";
        String where = entry.equals(shown) ? shown + " is " + what : shown + " holds " + entry + ", " + what;
        return new IllegalArgumentException(option + " " + where
                + "; Scorch replaces and deletes only regular files and folders: choose another output"
                + (a.isSymbolicLink() && entry.equals(shown) ? " (or give the link's target itself)" : ""));
    }

    private static BasicFileAttributes attributes(java.nio.file.Path p) {
        try {
            return Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException("cannot read what " + p + " is", e);
        }
    }

    static boolean isLocal(FileSystem fs) {
        return fs instanceof LocalFileSystem || fs instanceof RawLocalFileSystem;
    }
}
