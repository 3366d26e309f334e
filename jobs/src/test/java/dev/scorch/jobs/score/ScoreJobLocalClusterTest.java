package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.jobs.score.SparkTests.Scored;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import scala.Tuple2;

/**
 * The score job with real executor JVMs: master local-cluster[2,1,1024] (a standalone master and two
 * workers in this JVM, each launching an executor JVM). Weights go by broadcast into each executor's own
 * model cache; scores match the golden file; each executor JVM loads the model at most once.
 *
 * <p>Spark's workers build the executor command with its launcher, which wants a Spark installation. With
 * the Maven jars alone that works when spark.testing is set (the worker then takes its Spark home from
 * spark.test.home and does not insist on a jars/ folder) and spark.test.home is a folder with the layout
 * the launcher probes (jars/ and launcher/target/scala-2.13/, both empty); the executors get this JVM's class
 * path through spark.executor.extraClassPath and the project's JVM flags through extraJavaOptions.
 */
@Timeout(300)
class ScoreJobLocalClusterTest {
    @TempDir
    static Path tmp;

    static SparkSession cluster;
    static String oldTesting;
    static String oldTestHome;

    @BeforeAll
    static void startCluster() throws Exception {
        SparkTests.stopShared(); // one SparkContext per JVM
        Path home = tmp.resolve("spark-home");
        Files.createDirectories(home.resolve("jars"));
        Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
        oldTesting = System.setProperty("spark.testing", "true");
        oldTestHome = System.setProperty("spark.test.home", home.toString());
        cluster = SparkSession.builder()
                .master("local-cluster[2,1,1024]")
                .appName("scorch-local-cluster-test")
                .config("spark.ui.enabled", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.sql.shuffle.partitions", "4")
                .config("spark.executor.extraClassPath", SparkTests.classPath())
                // Short-lived executor JVMs: C1 only warms up faster than tiered compilation.
                .config(
                        "spark.executor.extraJavaOptions",
                        String.join(" ", SparkTests.jvmFlags()) + " -XX:TieredStopAtLevel=1")
                .config("spark.sql.codegen.wholeStage", "false") // and less Janino compiling in them
                .config(
                        "spark.executorEnv.SCORCH_MODEL_CACHE",
                        tmp.resolve("executor-model-cache").toString())
                .getOrCreate();
        // Executors register asynchronously; without them the first job would wait forever for resources.
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (cluster.sparkContext().statusTracker().getExecutorInfos().length < 3) { // the driver and two executors
            if (System.nanoTime() > deadline) {
                throw new AssertionError(
                        "the two executor JVMs did not register within 120 s; see " + home.resolve("work"));
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
            restore("spark.testing", oldTesting);
            restore("spark.test.home", oldTestHome);
        }
    }

    static void restore(String key, String old) {
        if (old == null) {
            System.clearProperty(key);
        } else {
            System.setProperty(key, old);
        }
    }

    @Test
    void executorJvmsScoreTheGoldenPromptsWithBroadcastWeights() {
        List<long[]> prompts = SparkTests.goldenPrompts();
        Path in = SparkTests.goldenInput(tmp);
        Path out = tmp.resolve("out");
        int driverLoads = ExecutorModelCache.loads();

        ScoreSummary s = SparkTests.spec(SparkTests.conformanceModel(), in, out)
                .weights("broadcast")
                .partitions(2)
                .maxBatchTokens(128)
                .run(cluster);
        assertEquals(prompts.size(), s.rows());
        assertEquals(0, s.errors());
        assertEquals("broadcast", s.weights());
        assertEquals(driverLoads, ExecutorModelCache.loads(), "the driver JVM scores nothing itself");

        Map<String, Scored> rows = SparkTests.readOutput(cluster, out, "parquet");
        assertEquals(prompts.size(), rows.size());
        JsonNode golden = SparkTests.golden().get("prompts");
        for (int i = 0; i < prompts.size(); i++) {
            Scored r = rows.get(String.valueOf(i));
            assertNotNull(r, "row " + i);
            assertNull(r.error(), "row " + i);
            JsonNode g = golden.get(i).get("next_token_logprobs");
            for (int k = 0; k < g.size(); k++) {
                assertEquals(
                        g.get(k).asDouble(), r.tokenLogprobs().get(k + 1), 1e-4, "row " + i + " position " + (k + 1));
            }
        }

        // Ask every executor JVM (many small tasks, so both answer) how many models it loaded.
        JavaSparkContext jsc = JavaSparkContext.fromSparkContext(cluster.sparkContext());
        List<Integer> seeds = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            seeds.add(i);
        }
        Map<Long, Integer> loadsByPid = new TreeMap<>();
        for (Tuple2<Long, Integer> t : jsc.parallelize(seeds, 32)
                .map(x -> new Tuple2<>(ProcessHandle.current().pid(), ExecutorModelCache.loads()))
                .distinct()
                .collect()) {
            loadsByPid.merge(t._1(), t._2(), Math::max);
        }
        System.out.println("local-cluster: model loads by executor pid " + loadsByPid);
        assertEquals(2, loadsByPid.size(), "two executor JVMs: " + loadsByPid);
        assertTrue(!loadsByPid.containsKey(ProcessHandle.current().pid()), "executors are other JVMs");
        for (var e : loadsByPid.entrySet()) {
            assertTrue(e.getValue() <= 1, "executor " + e.getKey() + " loaded the model " + e.getValue() + " times");
        }
        assertNotEquals(
                0, loadsByPid.values().stream().mapToInt(Integer::intValue).sum(), "some executor loaded the model");
    }
}
