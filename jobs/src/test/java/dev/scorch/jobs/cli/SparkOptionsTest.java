package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/**
 * What the CLI gives executors on a cluster master: the jobs jar in spark.jars (bin/scorch runs the CLI from the class
 * path, not through spark-submit, so nothing else ships it) and Scorch's JVM flags, never overriding what is set.
 */
class SparkOptionsTest {
    static final Path JAR = Path.of("/opt/scorch/jobs/target/scorch-jobs.jar");
    static final List<String> FLAGS =
            List.of("--add-modules=jdk.incubator.vector", "--add-opens=java.base/java.nio=ALL-UNNAMED");

    static SparkOptions options(String master, String... sparkConf) {
        SparkOptions o = new SparkOptions();
        o.master = master;
        o.sparkConf.addAll(List.of(sparkConf));
        return o;
    }

    @Test
    void aClusterMasterGetsTheJobsJarAndTheJvmFlags() {
        SparkConf sc = new SparkConf(false).setMaster("spark://10.0.0.1:7077");
        SparkOptions.forCluster(sc, JAR, FLAGS);
        assertEquals(JAR.toString(), sc.get("spark.jars"));
        assertEquals(String.join(" ", FLAGS), sc.get("spark.executor.extraJavaOptions"));
    }

    @Test
    void jarsAlreadyListedAreKeptAndOursIsAddedOnce() {
        SparkConf sc = new SparkConf(false).set("spark.jars", "hdfs:///libs/rapids-4-spark_2.13.jar");
        SparkOptions.forCluster(sc, JAR, FLAGS);
        assertEquals("hdfs:///libs/rapids-4-spark_2.13.jar," + JAR, sc.get("spark.jars"));
        SparkOptions.forCluster(sc, JAR, FLAGS);
        assertEquals("hdfs:///libs/rapids-4-spark_2.13.jar," + JAR, sc.get("spark.jars"), "listed once");

        // spark-submit lists its application jar as a URI (a copy, in cluster deploy mode): the same name is not added
        // again.
        SparkConf submitted = new SparkConf(false).set("spark.jars", "file:/tmp/driver-1234/scorch-jobs.jar");
        SparkOptions.forCluster(submitted, JAR, FLAGS);
        assertEquals("file:/tmp/driver-1234/scorch-jobs.jar", submitted.get("spark.jars"));
    }

    @Test
    void executorJavaOptionsThatAreSetAreKept() {
        SparkConf sc = new SparkConf(false).set("spark.executor.extraJavaOptions", "-Dsite.proxy=on");
        SparkOptions.forCluster(sc, JAR, FLAGS);
        assertEquals("-Dsite.proxy=on", sc.get("spark.executor.extraJavaOptions"));
    }

    @Test
    void withoutAJarOnlyTheFlagsAreSet() {
        SparkConf sc = new SparkConf(false);
        SparkOptions.forCluster(sc, null, FLAGS);
        assertFalse(sc.contains("spark.jars"));
    }

    @Test
    void confAppliesItOnClusterMastersOnly() {
        SparkConf cluster = options("spark://10.0.0.1:7077").conf("t");
        assertTrue(
                cluster.get("spark.executor.extraJavaOptions").contains("--add-modules=jdk.incubator.vector"),
                "the flags the build wrote: " + cluster.get("spark.executor.extraJavaOptions"));
        SparkConf localCluster = options("local-cluster[2,1,1024]").conf("t");
        assertTrue(
                localCluster.contains("spark.executor.extraJavaOptions"),
                "local-cluster executors are JVMs of their own");
        for (String local : List.of("local", "local[2]", "local[*]")) {
            SparkConf sc = options(local).conf("t");
            assertFalse(sc.contains("spark.jars"), local);
            assertFalse(sc.contains("spark.executor.extraJavaOptions"), local);
        }
        SparkConf given =
                options("yarn", "spark.executor.extraJavaOptions=-Xss4m").conf("t");
        assertEquals("-Xss4m", given.get("spark.executor.extraJavaOptions"));
    }

    /**
     * --cpu-precision is a job option, as --gpu-precision is: parsed into the job's options (shipped to the tasks),
     * "default" or none leaving each executor its own default; it sets no JVM property and no executor flag, so two
     * jobs in one JVM keep their own; a name that is no mode fails before Spark starts, naming the option.
     */
    @Test
    void cpuPrecisionIsAJobOption() {
        String before = System.getProperty("scorch.cpu.precision");
        JobOptions cluster = new JobOptions();
        cluster.master = "spark://10.0.0.1:7077";
        cluster.cpuPrecision = "BF16X3";
        assertEquals(dev.scorch.engine.kernels.CpuPrecision.BF16X3, cluster.cpuPrecision());
        String flags = cluster.conf("t").get("spark.executor.extraJavaOptions");
        assertTrue(flags.contains("--add-modules=jdk.incubator.vector"), flags);
        assertFalse(flags.contains("scorch.cpu.precision"), flags);
        assertEquals(before, System.getProperty("scorch.cpu.precision"));

        JobOptions local = new JobOptions();
        local.master = "local[2]";
        assertEquals(null, local.cpuPrecision());
        local.cpuPrecision = "default";
        assertEquals(null, local.cpuPrecision());
        local.cpuPrecision = "bf16";
        assertEquals(dev.scorch.engine.kernels.CpuPrecision.BF16, local.cpuPrecision());
        assertEquals(before, System.getProperty("scorch.cpu.precision"));

        local.cpuPrecision = "fp16";
        IllegalArgumentException e =
                org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, local::check);
        assertEquals(
                "--cpu-precision: unknown CPU precision 'fp16': expected fp32, bf16x3, bf16x2 or bf16", e.getMessage());
    }
}
