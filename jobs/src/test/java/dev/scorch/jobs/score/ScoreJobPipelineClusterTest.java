package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pipelined score job over real processes: master local-cluster[2,1,1024] (a standalone master and two workers in
 * this JVM, each launching a one-core executor JVM), so the two pipeline stages run in two executor processes that talk
 * over TCP on 127.0.0.1. Stage 0's process halts after its first batch, as a killed process would (no clean-up, its
 * sockets closed by the OS); Spark loses the executor, the worker starts another, the barrier stage runs again as a
 * whole, and the output holds every row once with the single-device bits. (How the cluster is started from the Maven
 * jars: {@link ScoreJobLocalClusterTest}.)
 */
@Timeout(420)
class ScoreJobPipelineClusterTest {
    @TempDir
    static Path tmp;

    static SparkSession cluster;
    static String oldTesting;
    static String oldTestHome;

    @BeforeAll
    static void startCluster() throws Exception {
        SparkTests.stopShared();
        Path home = tmp.resolve("spark-home");
        Files.createDirectories(home.resolve("jars"));
        Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
        oldTesting = System.setProperty("spark.testing", "true");
        oldTestHome = System.setProperty("spark.test.home", home.toString());
        cluster = SparkSession.builder()
                .master("local-cluster[2,1,1024]")
                .appName("scorch-pipeline-cluster-test")
                .config("spark.ui.enabled", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.executor.extraClassPath", SparkTests.classPath())
                .config(
                        "spark.executor.extraJavaOptions",
                        String.join(" ", SparkTests.jvmFlags()) + " -XX:TieredStopAtLevel=1")
                .config("spark.sql.codegen.wholeStage", "false")
                .config("spark.scorch.pipeline.connectTimeout", "60s")
                .config("spark.scorch.pipeline.idleTimeout", "120s")
                // A barrier stage waits for slots for all its tasks: check again every 2 s while the new executor
                // starts.
                .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "2s")
                .getOrCreate();
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (cluster.sparkContext().statusTracker().getExecutorInfos().length < 3) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the two executor JVMs did not register within 120 s");
            }
            Thread.sleep(100);
        }
    }

    @AfterAll
    static void stopCluster() {
        try {
            if (cluster != null) {
                cluster.stop();
            }
            SparkSession.clearActiveSession();
            SparkSession.clearDefaultSession();
        } finally {
            ScoreJobLocalClusterTest.restore("spark.testing", oldTesting);
            ScoreJobLocalClusterTest.restore("spark.test.home", oldTestHome);
        }
    }

    @Test
    void aKilledStageProcessMakesSparkRerunTheBarrierStage() throws Exception {
        ScoreJobPipelineTest.input = ScoreJobPipelineTest.writeInput(tmp);
        List<String> lost = java.util.Collections.synchronizedList(new ArrayList<>());
        SparkListener l = new SparkListener() {
            @Override
            public void onExecutorRemoved(SparkListenerExecutorRemoved e) {
                lost.add(e.executorId() + ": " + e.reason());
            }
        };
        cluster.sparkContext().addSparkListener(l);
        Path marker = tmp.resolve("killed-once");
        cluster.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", "0:0:exit:" + marker);
        try {
            Path out = tmp.resolve("out");
            ScoreSummary s = ScoreJobPipelineTest.spec(out, 2).run(cluster);
            assertTrue(Files.exists(marker), "stage 0's process halted once");
            cluster.sparkContext().listenerBus().waitUntilEmpty(30_000);
            assertEquals(1, lost.size(), lost.toString());
            assertEquals(ScoreJobPipelineTest.rows, s.rows());
            ScoreJobPipelineTest.checkRows(cluster, out);
        } finally {
            cluster.sparkContext().setLocalProperty("spark.scorch.pipeline.testFailure", null);
            cluster.sparkContext().removeSparkListener(l);
        }
    }
}
