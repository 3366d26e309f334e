package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The checkpoint lies at a path every executor sees. A local (or NFS) folder is mapped in place: nothing is copied, the
 * page cache shares it between the host's executors. Any other Hadoop FileSystem URI (hdfs://, s3a://, ...), and a local
 * folder with {@value WeightsDelivery#COPY_LOCAL_CONF}, is copied once per host into the model cache: one executor JVM
 * copies under the cache's lock while the others wait and then map its copy ({@link LocalModelFolder#assemble}), several
 * files at once ({@value WeightsDelivery#COPY_THREADS_CONF}), each file's size and CRC32C checked against the manifest
 * as it is written, its progress and throughput logged.
 */
public record SharedPathSource(String uri, ModelManifest manifest) implements ModelSource {
    private static final Logger LOG = LoggerFactory.getLogger(SharedPathSource.class);
    /** How often a copy in progress logs its throughput. */
    private static final long PROGRESS_NANOS = 10_000_000_000L;

    @Override
    public String mode() {
        return "shared-path";
    }

    @Override
    public Path materialize(Path cacheRoot) {
        return materialize(cacheRoot, WeightsDelivery.copyLocal(), WeightsDelivery.copyThreads(), hadoopConf());
    }

    /** As {@link #materialize(Path)} with the settings given (tests pass a Hadoop configuration of their own). */
    Path materialize(Path cacheRoot, boolean copyLocal, int threads, Configuration conf) {
        Path local = localPath();
        if (local != null && !copyLocal) {
            if (!Files.isDirectory(local)) {
                throw new CheckpointException(local + ": model " + manifest.name() + " is not there on executor host "
                        + hostName() + "; --weights shared-path needs every executor to see the folder at the driver's"
                        + " path (an NFS mount, a volume), or an hdfs:// or s3a:// path");
            }
            manifest.verify(local);
            return local;
        }
        String base = local != null ? local.toUri().toString() : uri;
        return LocalModelFolder.assemble(
                cacheRoot, manifest, tmp -> copy(RemoteCheckpoint.fileSystem(base, conf), base, tmp, threads), true);
    }

    /** The folder as a local path, or null when uri names another Hadoop file system. */
    private Path localPath() {
        if (uri.startsWith("file:")) {
            return Path.of(URI.create(uri));
        }
        return uri.contains("://") ? null : Path.of(uri);
    }

    /**
     * Copies every file of the manifest from base into tmp, threads files at once, each checked for its size and
     * CRC32C as it is written; logs the free space first, then progress and the throughput.
     */
    private void copy(FileSystem fs, String base, Path tmp, int threads) throws IOException {
        long total = manifest.totalBytes();
        LOG.info(
                "scorch weights: host {} copies model {}@{} ({} files, {}) from {} into {} ({} free there), {} files at once",
                hostName(),
                manifest.name(),
                manifest.shortHash(),
                manifest.files().size(),
                WeightsDelivery.gib(total),
                base,
                tmp.getParent(),
                WeightsDelivery.gib(Files.getFileStore(tmp).getUsableSpace()),
                threads);
        Progress progress = new Progress(total, System.nanoTime());
        ExecutorService pool = Executors.newFixedThreadPool(
                Math.min(threads, Math.max(1, manifest.files().size())), r -> {
                    Thread t = new Thread(r, "scorch-weights-copy");
                    t.setDaemon(true);
                    return t;
                });
        try {
            List<Future<?>> done = new ArrayList<>();
            for (ModelManifest.FileEntry e : manifest.files()) {
                done.add(pool.submit(() -> {
                    copyFile(fs, base, e, tmp, progress);
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while copying from " + base, e);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof IOException io) {
                throw io;
            }
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new IOException(e.getCause());
        } finally {
            // Stop the other files' copies (an interrupt closes their output channels) before the caller deletes tmp.
            pool.shutdownNow();
            try {
                pool.awaitTermination(1, TimeUnit.MINUTES);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        double s = (System.nanoTime() - progress.start) / 1e9;
        LOG.info(
                "scorch weights: host {} copied model {}@{} ({}) from {} in {} s: {} MB/s",
                hostName(),
                manifest.name(),
                manifest.shortHash(),
                WeightsDelivery.gib(total),
                base,
                String.format("%.1f", s),
                String.format("%.1f", total / 1e6 / Math.max(s, 1e-9)));
    }

    private void copyFile(FileSystem fs, String base, ModelManifest.FileEntry e, Path tmp, Progress progress)
            throws IOException {
        org.apache.hadoop.fs.Path src =
                new org.apache.hadoop.fs.Path(base.endsWith("/") ? base + e.name() : base + "/" + e.name());
        Path dst = LocalModelFolder.target(tmp, e.name());
        long len = fs.getFileStatus(src).getLen();
        if (len != e.size()) {
            throw new CheckpointException(src + ": " + len + " bytes, the manifest says " + e.size()
                    + " (the folder changed since the driver checked it)");
        }
        CRC32C crc = new CRC32C();
        long n = 0;
        byte[] buf = new byte[1 << 20];
        try (InputStream in = fs.open(src);
                OutputStream out = Files.newOutputStream(dst)) {
            for (int r = in.read(buf); r >= 0; r = in.read(buf)) {
                if (n + r > e.size()) {
                    throw new CheckpointException(src + ": longer than the manifest's " + e.size() + " bytes");
                }
                crc.update(buf, 0, r);
                out.write(buf, 0, r);
                n += r;
                progress.add(r, this, base);
            }
        }
        if (n != e.size()) {
            throw new CheckpointException(src + ": read " + n + " bytes, the manifest says " + e.size());
        }
        if (crc.getValue() != e.crc32c()) {
            throw new CheckpointException(src + ": checksum " + Long.toHexString(crc.getValue())
                    + " differs from the manifest's " + Long.toHexString(e.crc32c()));
        }
    }

    /** Bytes copied so far, logged with the throughput and the time left every {@link #PROGRESS_NANOS}. */
    private static final class Progress {
        final long total;
        final long start;
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong nextLog;

        Progress(long total, long start) {
            this.total = total;
            this.start = start;
            this.nextLog = new AtomicLong(start + PROGRESS_NANOS);
        }

        void add(long n, SharedPathSource s, String base) {
            long b = bytes.addAndGet(n);
            long now = System.nanoTime();
            long next = nextLog.get();
            if (now >= next && nextLog.compareAndSet(next, now + PROGRESS_NANOS)) {
                double secs = (now - start) / 1e9;
                double mbs = b / 1e6 / secs;
                LOG.info(
                        "scorch weights: copying model {}@{} from {}: {} of {} in {} s, {} MB/s, about {} s left",
                        s.manifest.name(),
                        s.manifest.shortHash(),
                        base,
                        WeightsDelivery.gib(b),
                        WeightsDelivery.gib(total),
                        String.format("%.0f", secs),
                        String.format("%.1f", mbs),
                        String.format("%.0f", (total - b) / 1e6 / mbs));
            }
        }
    }

    /** A Hadoop configuration with the application's spark.hadoop.* settings (credentials, endpoints), as Spark makes one. */
    static Configuration hadoopConf() {
        Configuration c = new Configuration();
        SparkEnv env = SparkEnv.get();
        if (env != null) {
            for (var kv : env.conf().getAllWithPrefix("spark.hadoop.")) {
                c.set(kv._1(), kv._2());
            }
        }
        return c;
    }

    private static String hostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "(unknown host: " + e.getMessage() + ")";
        }
    }
}
