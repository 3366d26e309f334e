package dev.scorch.jobs.cli;

import dev.scorch.jobs.JobConfig;
import dev.scorch.udfs.api.Bounds;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Option;

/**
 * The options every Spark command takes (a picocli mixin): master, job config, Spark settings, partitions, weight
 * shipping, engine threads. Each option's default comes from the job config's {@code scorch.NAME} when it has one,
 * else from the built-in default.
 */
public class SparkOptions {
    @Option(names = "--master", description = "Spark master. Default: spark-submit's, else local[*].")
    String master;

    @Option(
            names = "--conf",
            description = "Job config file (e.g. conf/local.conf): spark.* settings and scorch.* option defaults.")
    Path conf;

    @Option(names = "--spark-conf", description = "A Spark setting k=v (repeatable); wins over --conf.")
    List<String> sparkConf = new ArrayList<>();

    @Option(names = "--partitions", description = "Partitions to run in. Default: Spark's default parallelism.")
    Integer partitions;

    @Option(
            names = "--weights",
            description = "auto, broadcast (driver ships the shards as broadcast blocks; refused past"
                    + " spark.scorch.weights.broadcastMaxSize, 4g), shared-path (executors read --model's path:"
                    + " local/NFS mapped in place; hdfs://, s3a:// copied once per host) or files"
                    + " (SparkContext.addFile). Default auto: shared-path on local masters; elsewhere broadcast up to"
                    + " the broadcast limit, shared-path past it.")
    String weights;

    @Option(names = "--threads", description = "Engine threads per task. Default: spark.task.cpus (1).")
    Integer threads;

    private JobConfig config;
    private boolean ownsSession;

    /** The job config file's settings (empty without --conf). */
    JobConfig config() {
        if (config == null) {
            config = conf == null ? JobConfig.empty() : JobConfig.read(conf);
        }
        return config;
    }

    /**
     * A session from --conf, --spark-conf and --master (local[*] when nothing names one).
     */
    SparkSession session(String appName) {
        SparkConf sc = conf(appName);
        // A session that already runs in this JVM (a notebook's, a test's) is used and left running.
        ownsSession = SparkSession.getActiveSession().isEmpty()
                && SparkSession.getDefaultSession().isEmpty();
        // The jobs wait for a first executor (ExecutorWait) once they hold their output's lease, so that a job refused
        // for its output says so at once, even on a cluster whose cores another job holds.
        return SparkSession.builder().config(sc).getOrCreate();
    }

    /** The settings session() starts Spark with; on a cluster master, with what the executors need from {@link #forCluster}. */
    SparkConf conf(String appName) {
        SparkConf sc = new SparkConf();
        config().spark().forEach(sc::set);
        for (String kv : sparkConf) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--spark-conf " + kv + ": expected key=value");
            }
            sc.set(kv.substring(0, eq), kv.substring(eq + 1));
        }
        if (master != null) {
            sc.setMaster(master);
        } else if (!sc.contains("spark.master")) {
            sc.setMaster("local[*]");
        }
        sc.setIfMissing("spark.app.name", appName);
        sc.setIfMissing("spark.ui.showConsoleProgress", "false");
        // Given every time (--lease-wait sets it): a session that outlives one job (a notebook's, a test's) must not
        // keep an earlier job's wait for the output's lease.
        sc.setIfMissing(dev.scorch.jobs.PartitionedRun.LEASE_WAIT, "0");
        String m = sc.get("spark.master");
        if (!m.equals("local") && !m.startsWith("local[")) {
            forCluster(sc, jobsJar(), jvmFlags());
        }
        return sc;
    }

    /**
     * What executors in JVMs of their own need (a cluster master, or local-cluster): the jar with the jobs' classes in
     * spark.jars, as spark-submit puts its application jar there (without it every task fails deserialising its
     * function: ClassCastException ... SerializedLambda ... MapPartitionsRDD.f); and Scorch's JVM flags as
     * spark.executor.extraJavaOptions when nothing sets that key (Spark adds its own module options, the Vector API's
     * included; Scorch's add the JIT settings the engine is tuned with). A value that is set, maybe the cluster's own, is
     * kept as it is.
     *
     * @param jar the jobs jar, or null when the classes do not come from a jar (run from a build's classes folder: then
     *     spark-submit or spark.jars must ship them)
     */
    static void forCluster(SparkConf sc, Path jar, List<String> flags) {
        if (jar != null) {
            String jars = sc.get("spark.jars", "");
            boolean listed = false;
            for (String j : jars.split(",")) {
                String name = j.trim().replaceAll(".*/", "");
                listed |= name.equals(jar.getFileName().toString());
            }
            if (!listed) {
                sc.set("spark.jars", jars.isBlank() ? jar.toString() : jars + "," + jar);
            }
        }
        sc.setIfMissing("spark.executor.extraJavaOptions", String.join(" ", flags));
    }

    /** Scorch's JVM flags: scorch-jvm.flags, which the build writes from the parent pom into the jobs jar. */
    static List<String> jvmFlags() {
        try (InputStream in = SparkOptions.class.getResourceAsStream("/scorch-jvm.flags")) {
            if (in == null) {
                throw new IllegalStateException(
                        "scorch-jvm.flags is not on the class path (a jobs jar built by mvn package has it)");
            }
            return List.of(
                    new String(in.readAllBytes(), StandardCharsets.UTF_8).trim().split("\\s+"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The jar this class was loaded from (bin/scorch's or spark-submit's jobs jar); null when it is not a jar. */
    static Path jobsJar() {
        try {
            var src = SparkOptions.class.getProtectionDomain().getCodeSource();
            Path p = src == null ? null : Path.of(src.getLocation().toURI());
            return p != null && Files.isRegularFile(p) && p.toString().endsWith(".jar") ? p : null;
        } catch (java.net.URISyntaxException | IllegalArgumentException | SecurityException e) {
            return null;
        }
    }

    /** Stops the session {@link #session} made; one it found running stays up. */
    void stop(SparkSession spark) {
        if (ownsSession) {
            spark.stop();
        }
    }

    /**
     * Checks the numeric options this class reads (given, else from the job config) against their ranges, before
     * session() starts Spark: a bad value fails with exit 2 naming the option, not in the executors.
     */
    void check() {
        bounded("partitions", partitions, 1, Bounds.PARTITIONS);
        bounded("threads", threads, 1, Bounds.THREADS);
    }

    int partitions(SparkSession spark) {
        return bounded("partitions", partitions, spark.sparkContext().defaultParallelism(), Bounds.PARTITIONS);
    }

    /** --weights, else the config's scorch.weights, else auto (ScorchModel.ship then chooses by master and size). */
    String weights(SparkSession spark) {
        return choice("weights", weights, "auto", "auto", "broadcast", "shared-path", "files");
    }

    /** --threads, else the config's scorch.threads, else spark.task.cpus; 1 to {@link Bounds#THREADS}' 1024. */
    int threads(SparkSession spark) {
        Long v = configured("threads", threads);
        if (v != null) {
            return Bounds.THREADS.check("--threads", v);
        }
        String cpus = spark.sparkContext().getConf().get("spark.task.cpus", "1");
        try {
            return Bounds.THREADS.check("--threads (default: spark.task.cpus)", Long.parseLong(cpus.trim()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("spark.task.cpus " + cpus + ": expected a whole number", e);
        }
    }

    /** An integer option: given, else the config's scorch.NAME, else dflt; within bound ("--NAME V: expected A to B"). */
    int bounded(String name, Integer given, int dflt, Bounds.Ints bound) {
        Long v = configured(name, given);
        return bound.check("--" + name, v != null ? v : dflt);
    }

    /** An integer option as given, else the config's scorch.NAME, else null. */
    Long configured(String name, Integer given) {
        if (given != null) {
            return (long) given;
        }
        String v = config().option(name, null);
        if (v == null) {
            return null;
        }
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    "--" + name + " (scorch." + name + " in --conf) " + v + ": expected a whole number", e);
        }
    }

    /** A double option: given, else the config's scorch.NAME, else dflt (may be null); within bound. */
    Double decimal(String name, Double given, Double dflt, Bounds.Decimals bound) {
        Double v = given;
        if (v == null) {
            String c = config().option(name, null);
            try {
                v = c == null ? dflt : Double.valueOf(c.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(
                        "--" + name + " (scorch." + name + " in --conf) " + c + ": expected a number", e);
            }
        }
        return v == null ? null : bound.check("--" + name, v);
    }

    /** One of allowed: given, else the config's scorch.NAME, else dflt. */
    String choice(String name, String given, String dflt, String... allowed) {
        String v = given != null ? given : config().option(name, dflt);
        for (String a : allowed) {
            if (a.equals(v)) {
                return v;
            }
        }
        throw new IllegalArgumentException("--" + name + " " + v + ": expected one of " + String.join(", ", allowed));
    }
}
