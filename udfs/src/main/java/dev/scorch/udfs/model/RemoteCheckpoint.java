package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelFiles;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileChecksum;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.util.VersionInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A checkpoint folder on another Hadoop file system (hdfs://, s3a://), checked on the driver without reading its
 * shards where the file system can say their CRC32C. The driver copies the small files a load reads (configs, index,
 * tokenizer) into a local folder and writes each shard there as its header followed by a hole of the shard's size:
 * enough for the config, shape and storage checks, which read headers only. The manifest takes each shard's CRC32C from
 * the file system's composite CRC (HDFS with {@value #COMBINE_MODE} = COMPOSITE_CRC, set here) and otherwise reads the
 * shard through once. Executors copy the real files from the URI ({@link SharedPathSource}) and check every byte
 * against the manifest, so a checksum the file system got wrong fails the copy rather than loading other weights; the
 * local folder's shards hold no weights and fail any check against the manifest.
 */
public final class RemoteCheckpoint {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteCheckpoint.class);

    /** The Hadoop setting that makes HDFS answer a file's checksum as its CRC32C, whatever its block size. */
    static final String COMBINE_MODE = "dfs.checksum.combine.mode";

    /** The largest non-shard file copied to the driver: tokenizers are tens of MB, configs a few KB. */
    static final long MAX_METADATA_BYTES = 256L << 20;

    /** The most shards a folder may list (Kimi K2 ships 62). */
    static final int MAX_SHARDS = 100_000;

    private RemoteCheckpoint() {}

    /** A remote folder's local stand-in (metadata and shard headers) and its manifest. */
    public record Staged(Path dir, ModelManifest manifest) {}

    /** Whether location names a folder on a Hadoop file system other than the local one (a URI with a scheme). */
    public static boolean isRemote(String location) {
        int colon = location.indexOf("://");
        if (colon < 2) {
            return false;
        }
        String scheme = location.substring(0, colon);
        return !scheme.equals("file")
                && scheme.chars().allMatch(c -> Character.isLetterOrDigit(c) || c == '+' || c == '-' || c == '.');
    }

    /**
     * A local location as a path: a file: URI (file:///abs/folder, file:/abs/folder, file://localhost/abs/folder; its
     * %-escapes decoded) or a plain path as given. Throws for a file: URI that names no absolute local path.
     */
    public static Path localPath(String location) {
        if (!location.regionMatches(true, 0, "file:", 0, 5)) {
            return Path.of(location);
        }
        URI u;
        try {
            u = new URI(location);
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException(location + ": not a valid file: URI (" + e.getMessage() + ")", e);
        }
        String host = u.getAuthority();
        if (u.getPath() == null || !u.getPath().startsWith("/") || (host != null && !host.equals("localhost"))) {
            throw new IllegalArgumentException(
                    location + ": a file: URI names an absolute folder on this machine, e.g. file:///models/K2");
        }
        return Path.of(u.getPath());
    }

    /**
     * Stages the folder at uri into a new folder under stagingRoot and makes its manifest (the one {@link
     * ModelManifest#of(Path)} makes of the same files). Throws naming the file and what is wrong.
     */
    public static Staged stage(String uri, Configuration conf, Path stagingRoot) {
        Configuration c = new Configuration(conf);
        if (c.get(COMBINE_MODE) == null) {
            c.set(COMBINE_MODE, "COMPOSITE_CRC");
        }
        org.apache.hadoop.fs.Path base = new org.apache.hadoop.fs.Path(uri);
        try {
            FileSystem fs = fileSystem(uri, c);
            FileStatus folder = fs.getFileStatus(base);
            if (!folder.isDirectory()) {
                throw new CheckpointException(uri + ": not a model folder");
            }
            Files.createDirectories(stagingRoot);
            Path local = Files.createTempDirectory(stagingRoot, "remote-");
            local.toFile().deleteOnExit(); // after its files, which register later (deleted in reverse order)
            Map<String, FileStatus> files = new HashMap<>(); // the folder's files by name, listed once
            int shards = 0;
            for (FileStatus st : fs.listStatus(base)) {
                String name = st.getPath().getName();
                if (st.isFile() && name.endsWith(".safetensors") && ++shards > MAX_SHARDS) {
                    throw new CheckpointException(uri + ": more than " + MAX_SHARDS + " *.safetensors files");
                }
                if (st.isFile()) {
                    files.put(name, st);
                }
            }
            List<ModelManifest.FileEntry> entries = new ArrayList<>();
            for (String name : ModelFiles.METADATA) {
                FileStatus st = files.get(name);
                if (st != null) {
                    local.resolve(name).toFile().deleteOnExit();
                    entries.add(copySmall(fs, st, local.resolve(name)));
                }
            }
            for (FileStatus st : files.values()) {
                String name = st.getPath().getName();
                if (name.endsWith(".safetensors")) {
                    local.resolve(name).toFile().deleteOnExit();
                    stubShard(fs, st, local.resolve(name));
                }
            }
            Checkpoint ckpt = Checkpoint.open(local);
            for (SafetensorsFile sf : ckpt.shards()) {
                FileStatus st = files.get(sf.path().getFileName().toString());
                entries.add(new ModelManifest.FileEntry(
                        st.getPath().getName(), st.getLen(), crc32c(fs, st.getPath(), st.getLen())));
            }
            return new Staged(local, ModelManifest.of(base.getName(), entries));
        } catch (IOException e) {
            throw new CheckpointException(uri + ": " + e.getMessage(), e);
        }
    }

    /**
     * The file system of uri; a connector missing from the class path (s3a:// without hadoop-aws) fails naming the URI
     * and the jar to add, not with a bare ClassNotFoundException.
     */
    static FileSystem fileSystem(String uri, Configuration conf) throws IOException {
        try {
            return FileSystem.get(URI.create(uri), conf);
        } catch (RuntimeException | LinkageError e) {
            Throwable missing = e;
            while (missing != null
                    && !(missing instanceof ClassNotFoundException || missing instanceof NoClassDefFoundError)) {
                missing = missing.getCause();
            }
            if (missing == null) {
                throw e;
            }
            String scheme = URI.create(uri).getScheme();
            String hadoop = VersionInfo.getVersion();
            String add = scheme.equals("s3a")
                    ? "add org.apache.hadoop:hadoop-aws:" + hadoop + " (the Hadoop version Spark ships) and its AWS SDK"
                            + " bundle (software.amazon.awssdk:bundle) to the driver's and executors' class path, e.g."
                            + " spark-submit --packages org.apache.hadoop:hadoop-aws:" + hadoop
                    : "add the Hadoop connector jar for " + scheme + ":// (built for Hadoop " + hadoop
                            + ") to the driver's and executors' class path";
            throw new CheckpointException(
                    uri + ": the " + scheme + ":// file system's classes are not on the class path ("
                            + missing.getMessage() + "); " + add,
                    e);
        }
    }

    /** Copies a configuration or tokenizer file, refusing one past {@link #MAX_METADATA_BYTES}; its entry. */
    private static ModelManifest.FileEntry copySmall(FileSystem fs, FileStatus st, Path dst) throws IOException {
        org.apache.hadoop.fs.Path src = st.getPath();
        long size = st.getLen();
        if (size > MAX_METADATA_BYTES) {
            throw new CheckpointException(src + ": " + size + " bytes, more than the " + MAX_METADATA_BYTES
                    + " a checkpoint's configuration or tokenizer file may have");
        }
        CRC32C crc = new CRC32C();
        long n = 0;
        byte[] buf = new byte[1 << 16];
        try (InputStream in = fs.open(src);
                OutputStream out = Files.newOutputStream(dst)) {
            for (int r = in.read(buf); r >= 0 && n <= size; r = in.read(buf)) {
                crc.update(buf, 0, r);
                out.write(buf, 0, r);
                n += r;
            }
        }
        if (n != size) {
            throw new CheckpointException(src + ": read " + n + " bytes, its listing says " + size);
        }
        return new ModelManifest.FileEntry(src.getName(), size, crc.getValue());
    }

    /** Writes the shard's length and JSON header, then a hole to its full size (no disk is used for it). */
    private static void stubShard(FileSystem fs, FileStatus st, Path dst) throws IOException {
        long size = st.getLen();
        if (size < 8) {
            throw new CheckpointException(
                    st.getPath() + ": " + size + " bytes is too short for a safetensors header length");
        }
        try (FSDataInputStream in = fs.open(st.getPath());
                RandomAccessFile out = new RandomAccessFile(dst.toFile(), "rw")) {
            byte[] len = new byte[8];
            in.readFully(0, len);
            long headerLen = ByteBuffer.wrap(len).order(ByteOrder.LITTLE_ENDIAN).getLong();
            if (headerLen < 2 || headerLen > size - 8 || headerLen > SafetensorsFile.MAX_HEADER_BYTES) {
                throw new CheckpointException(st.getPath() + ": header length " + Long.toUnsignedString(headerLen)
                        + " does not fit the file's " + size + " bytes and the "
                        + SafetensorsFile.MAX_HEADER_BYTES + "-byte limit");
            }
            byte[] header = new byte[(int) headerLen];
            in.readFully(8, header);
            out.write(len);
            out.write(header);
            out.setLength(size);
        }
    }

    /** The file's CRC32C: the file system's composite CRC where it gives one, else computed by reading it through. */
    private static long crc32c(FileSystem fs, org.apache.hadoop.fs.Path p, long size) throws IOException {
        FileChecksum sum = fs.getFileChecksum(p);
        if (sum != null && sum.getAlgorithmName().equals("COMPOSITE-CRC32C") && sum.getLength() == 4) {
            return ByteBuffer.wrap(sum.getBytes()).getInt() & 0xffffffffL;
        }
        LOG.info(
                "scorch weights: {} gives no CRC32C of {} ({}); reading its {} bytes on the driver to checksum it",
                fs.getScheme(),
                p,
                sum == null ? "no checksum" : sum.getAlgorithmName(),
                size);
        CRC32C crc = new CRC32C();
        long n = 0;
        byte[] buf = new byte[1 << 20];
        try (InputStream in = fs.open(p)) {
            for (int r = in.read(buf); r >= 0; r = in.read(buf)) {
                crc.update(buf, 0, r);
                n += r;
            }
        }
        if (n != size) {
            throw new CheckpointException(p + ": read " + n + " bytes, its listing says " + size);
        }
        return crc.getValue();
    }
}
