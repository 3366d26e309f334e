package dev.scorch.engine.checkpoint;

import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * What identifies a checkpoint folder for shipping and caching: every file a model load reads (the shards and
 * {@link ModelFiles#METADATA}: configs, index, tokenizer files and chat template), each with its size and CRC32C, and a
 * content hash over all of them. The driver makes it once; executors verify the files they map against it, and cache
 * loaded models by its hash.
 */
public record ModelManifest(String name, List<FileEntry> files, String contentHash) implements Serializable {

    /**
     * Checksums this JVM computed, by file, with the file's size, modification time and identity (inode) then. A file
     * whose three are unchanged is not read again: where the driver and an executor are one JVM (local masters, a CPU
     * server), verifying the folder the manifest was just made from would otherwise read the whole checkpoint twice.
     */
    private record Stamp(long size, java.nio.file.attribute.FileTime modified, Object fileKey, long crc32c) {}

    private static final java.util.Map<Path, Stamp> CHECKED = new java.util.concurrent.ConcurrentHashMap<>();
    private static final java.util.concurrent.atomic.AtomicLong BYTES_CHECKSUMMED =
            new java.util.concurrent.atomic.AtomicLong();

    /** One file of the folder, by its name relative to the folder. */
    public record FileEntry(String name, long size, long crc32c) implements Serializable {}

    public static ModelManifest of(Path dir) {
        Checkpoint ckpt = Checkpoint.open(dir);
        List<Path> paths = new ArrayList<>();
        for (String m : ModelFiles.METADATA) {
            if (Files.isRegularFile(dir.resolve(m))) {
                paths.add(dir.resolve(m));
            }
        }
        for (SafetensorsFile sf : ckpt.shards()) {
            paths.add(sf.path());
        }
        Path base = dir.toAbsolutePath().normalize();
        List<FileEntry> entries = new ArrayList<>();
        for (Path p : paths) {
            ModelFiles.requireInside(dir, p);
            String rel = base.relativize(p.toAbsolutePath().normalize()).toString();
            entries.add(new FileEntry(rel, size(p), checkedCrc32c(p)));
        }
        return of(base.getFileName().toString(), entries);
    }

    /**
     * The manifest of files whose sizes and CRC32Cs are known another way (a folder on another file system, whose own
     * checksums give them): the same hash as {@link #of(Path)} for the same files in the same order.
     */
    public static ModelManifest of(String name, List<FileEntry> entries) {
        return new ModelManifest(name, List.copyOf(entries), hash(entries));
    }

    private static long size(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            throw new CheckpointException(p + ": " + e.getMessage(), e);
        }
    }

    /** CRC32C of a whole file (hardware-accelerated: several GB/s, so a large checkpoint is checked in seconds). */
    public static long crc32c(Path p) {
        CRC32C crc = new CRC32C();
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            ByteBuffer buf = ByteBuffer.allocateDirect(1 << 20);
            for (int n = ch.read(buf); n >= 0; n = ch.read(buf)) {
                BYTES_CHECKSUMMED.addAndGet(n);
                buf.flip();
                crc.update(buf);
                buf.clear();
            }
        } catch (IOException e) {
            throw new CheckpointException(p + ": cannot read for its checksum: " + e.getMessage(), e);
        }
        return crc.getValue();
    }

    /** Bytes this JVM has read to checksum whole files ({@link #crc32c(Path)}), in all. */
    public static long bytesChecksummed() {
        return BYTES_CHECKSUMMED.get();
    }

    /** CRC32C of a whole file: the one this JVM computed, when its size, time and identity are as they were then. */
    private static long checkedCrc32c(Path p) {
        Path key = p.toAbsolutePath().normalize();
        java.nio.file.attribute.BasicFileAttributes before = attributes(p);
        Stamp s = CHECKED.get(key);
        if (s != null
                && s.size() == before.size()
                && s.modified().equals(before.lastModifiedTime())
                && java.util.Objects.equals(s.fileKey(), before.fileKey())) {
            return s.crc32c();
        }
        long crc = crc32c(p);
        java.nio.file.attribute.BasicFileAttributes after = attributes(p);
        if (after.size() == before.size()
                && after.lastModifiedTime().equals(before.lastModifiedTime())
                && java.util.Objects.equals(after.fileKey(), before.fileKey())) {
            CHECKED.put(key, new Stamp(after.size(), after.lastModifiedTime(), after.fileKey(), crc));
        }
        return crc;
    }

    private static java.nio.file.attribute.BasicFileAttributes attributes(Path p) {
        try {
            return Files.readAttributes(p, java.nio.file.attribute.BasicFileAttributes.class);
        } catch (IOException e) {
            throw new CheckpointException(p + ": " + e.getMessage(), e);
        }
    }

    private static String hash(List<FileEntry> entries) {
        try {
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            for (FileEntry e : entries) {
                sha.update((e.name() + "\0" + e.size() + "\0" + Long.toHexString(e.crc32c()) + "\n")
                        .getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
            return HexFormat.of().formatHex(sha.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The first 12 hex digits of the content hash: enough to tell models apart in output rows and cache folders. */
    public String shortHash() {
        return contentHash.substring(0, 12);
    }

    public long totalBytes() {
        return files.stream().mapToLong(FileEntry::size).sum();
    }

    /**
     * Checks that {@code dir} holds exactly these files (size and CRC32C); throws naming the first file that differs. A
     * file this JVM has checksummed and that has not changed since (size, modification time, inode) is not read again.
     */
    public void verify(Path dir) {
        for (FileEntry e : files) {
            Path p = dir.resolve(e.name());
            if (!Files.isRegularFile(p)) {
                throw new CheckpointException(p + ": file of model " + name + " is missing");
            }
            long size = size(p);
            if (size != e.size()) {
                throw new CheckpointException(p + ": " + size + " bytes, the manifest says " + e.size());
            }
            long crc = checkedCrc32c(p);
            if (crc != e.crc32c()) {
                throw new CheckpointException(p + ": checksum " + Long.toHexString(crc)
                        + " differs from the manifest's " + Long.toHexString(e.crc32c()));
            }
        }
    }
}
