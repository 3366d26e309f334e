package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/**
 * Which way the weights reach executors when the job does not say, how large a broadcast may be, and the settings of the
 * host copies shared-path makes. Broadcast puts a full copy of the checkpoint in the driver's block store before any
 * task runs, so it suits small models only; past {@value #BROADCAST_MAX_CONF} it is refused, and the default turns to
 * shared-path, where executors read the folder themselves (one copy per host, or none when mapped in place).
 */
public final class WeightsDelivery {
    /** The default mode: chosen by {@link #defaultMode} from the master and the checkpoint's size. */
    public static final String AUTO = "auto";

    /** Spark setting (a byte size: 512m, 4g): the largest checkpoint broadcast ships; default {@value #BROADCAST_MAX_DEFAULT}. */
    public static final String BROADCAST_MAX_CONF = "spark.scorch.weights.broadcastMaxSize";

    static final String BROADCAST_MAX_DEFAULT = "4g";

    /** Spark setting: files a host's copy reads at once from the shared file system (default {@value #COPY_THREADS_DEFAULT}). */
    public static final String COPY_THREADS_CONF = "spark.scorch.weights.copyThreads";

    static final int COPY_THREADS_DEFAULT = 4;

    /**
     * Spark setting: true copies a local or NFS folder into each host's model cache too, through Hadoop's file:
     * FileSystem (default false: mapped in place, nothing copied). For NFS mounts whose random reads are slow: a
     * mixture-of-experts model reads scattered experts, which a local disk serves far better than the network.
     */
    public static final String COPY_LOCAL_CONF = "spark.scorch.weights.copyLocal";

    private WeightsDelivery() {}

    /** The broadcast limit in bytes from conf ({@value #BROADCAST_MAX_CONF}, default {@value #BROADCAST_MAX_DEFAULT}). */
    public static long broadcastMax(SparkConf conf) {
        long max = conf.getSizeAsBytes(BROADCAST_MAX_CONF, BROADCAST_MAX_DEFAULT);
        if (max < 0) {
            throw new IllegalArgumentException(
                    BROADCAST_MAX_CONF + " must not be negative, got " + conf.get(BROADCAST_MAX_CONF));
        }
        return max;
    }

    /**
     * The mode when none is given: shared-path on a local master (the executors are this process, the folder is here);
     * elsewhere broadcast up to the broadcast limit and shared-path past it.
     */
    public static String defaultMode(boolean localMaster, long modelBytes, long broadcastMax) {
        return localMaster || modelBytes > broadcastMax ? "shared-path" : "broadcast";
    }

    /** Why {@link #defaultMode} chose what it did, for the driver's log. */
    public static String defaultReason(boolean localMaster, long modelBytes, long broadcastMax) {
        if (localMaster) {
            return "local master: executors read the folder in place";
        }
        return "model " + gib(modelBytes) + (modelBytes > broadcastMax ? " is over " : " is within ")
                + "the broadcast limit " + gib(broadcastMax) + " (" + BROADCAST_MAX_CONF + ")";
    }

    /** Throws, saying what to use instead, when the model is larger than the broadcast limit. */
    public static void checkBroadcast(ModelManifest m, long broadcastMax) {
        if (m.totalBytes() > broadcastMax) {
            throw new CheckpointException("model " + m.name() + "@" + m.shortHash() + " is " + m.totalBytes()
                    + " bytes ("
                    + gib(m.totalBytes()) + "), over the broadcast limit of " + broadcastMax + " bytes ("
                    + gib(broadcastMax)
                    + ", " + BROADCAST_MAX_CONF + "): --weights broadcast would hold a full copy in the driver's block"
                    + " store before any task runs. Use --weights shared-path with a folder every executor sees at the"
                    + " same path (NFS or a local copy: mapped in place), or with an hdfs:// or s3a:// path (each host"
                    + " copies it once into its model cache); or raise " + BROADCAST_MAX_CONF + ".");
        }
    }

    /** Files copied at once ({@value #COPY_THREADS_CONF}) in this executor's application, at least 1. */
    static int copyThreads() {
        SparkEnv env = SparkEnv.get();
        int n = env == null ? COPY_THREADS_DEFAULT : env.conf().getInt(COPY_THREADS_CONF, COPY_THREADS_DEFAULT);
        if (n < 1) {
            throw new IllegalArgumentException(COPY_THREADS_CONF + " must be at least 1, got " + n);
        }
        return n;
    }

    /** Whether this executor's application copies local folders too ({@value #COPY_LOCAL_CONF}). */
    static boolean copyLocal() {
        SparkEnv env = SparkEnv.get();
        return env != null && env.conf().getBoolean(COPY_LOCAL_CONF, false);
    }

    static String gib(long bytes) {
        return String.format("%.2f GiB", bytes / (double) (1L << 30));
    }
}
