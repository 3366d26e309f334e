package dev.scorch.udfs.model;

import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32C;
import org.apache.hadoop.fs.CompositeCrcFileChecksum;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.util.DataChecksum;

/**
 * The local disk as a file system of its own scheme, {@code scorchtest://} (registered through META-INF/services, as
 * hdfs and s3a are): not mappable in place, so a model there takes the remote path. It answers a file's checksum as
 * HDFS does with COMPOSITE_CRC (the file's CRC32C) when {@link #serveCrc32c} is set, and nothing otherwise (as object
 * stores without checksums); the bytes read through it are counted by Hadoop's statistics for the scheme.
 */
public final class RemoteTestFileSystem extends RawLocalFileSystem {
    public static final String SCHEME = "scorchtest";

    public static volatile boolean serveCrc32c = true;

    @Override
    public String getScheme() {
        return SCHEME;
    }

    @Override
    public URI getUri() {
        return URI.create(SCHEME + ":///");
    }

    @Override
    public FileChecksum getFileChecksum(Path f) throws IOException {
        if (!serveCrc32c) {
            return null;
        }
        CRC32C crc = new CRC32C(); // read aside, not through this file system, so it counts no bytes
        try (FileChannel ch = FileChannel.open(pathToFile(f).toPath(), StandardOpenOption.READ)) {
            ByteBuffer buf = ByteBuffer.allocate(1 << 20);
            while (ch.read(buf) >= 0) {
                buf.flip();
                crc.update(buf);
                buf.clear();
            }
        }
        return new CompositeCrcFileChecksum((int) crc.getValue(), DataChecksum.Type.CRC32C, 512);
    }

    /** Bytes read through the scheme's file systems so far. */
    public static long bytesRead() {
        return FileSystem.getStatistics(SCHEME, RemoteTestFileSystem.class).getBytesRead();
    }

    /** A local folder's URI on this file system. */
    public static String uri(java.nio.file.Path dir) {
        return SCHEME + "://" + dir.toAbsolutePath();
    }
}
