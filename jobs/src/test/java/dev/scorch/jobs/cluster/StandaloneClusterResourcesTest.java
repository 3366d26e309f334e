package dev.scorch.jobs.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * What a standalone cluster is asked for and what it keeps: executors larger than any Worker fail the job within
 * spark.scorch.executorWait (not a wait for ever), --weights files leaves no model copy in the Workers' application
 * folders, and the class path files a cluster's Spark distribution is made from are whole. A Master and two Workers
 * (one core, 1.5 GiB each) as JVMs of their own, jobs submitted through SparkSubmit with the shaded jobs jar.
 *
 * <p>Run with bin/test-cluster (mvn -Pcluster: after package). Logs under target/cluster-resources-test/logs.
 */
@Tag("cluster")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 6, unit = TimeUnit.MINUTES)
class StandaloneClusterResourcesTest {
    static final int ROWS = 40;
    static final Duration RUN_LIMIT = Duration.ofMinutes(4);

    static Path dir;
    static Path jobsTarget;
    static Path jobsJar;
    static Path model;
    static Path input;
    static Path cacheDir;
    static ModelManifest manifest;
    static List<String> flags;
    static StandaloneCluster cluster;

    @BeforeAll
    static void setUp() throws Exception {
        jobsTarget = Path.of(System.getProperty("scorch.jobs.target", "target"))
                .toAbsolutePath()
                .normalize();
        jobsJar = jobsTarget.resolve("scorch-jobs.jar");
        assertTrue(
                Files.isRegularFile(jobsJar),
                jobsJar + " is missing: run bin/test-cluster (mvn -Pcluster verify packages it first)");
        dir = jobsTarget.resolve("cluster-resources-test");
        deleteTree(dir);
        Files.createDirectories(dir);
        cacheDir = dir.resolve("model-cache");
        flags = SparkTests.jvmFlags();
        model = dir.resolve("demo-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 0).write(model);
        manifest = ModelManifest.of(model);
        List<String> lines = new ArrayList<>();
        Random r = new Random(7);
        for (int i = 0; i < ROWS; i++) {
            StringBuilder b = new StringBuilder("{\"id\":\"r" + i + "\",\"token_ids\":[");
            int n = 4 + r.nextInt(12);
            for (int k = 0; k < n; k++) {
                b.append(k == 0 ? "" : ",").append(1 + r.nextInt(DemoPreset.TINY.vocabSize() - 1));
            }
            lines.add(b.append("]}").toString());
        }
        input = SparkTests.writeJsonl(dir.resolve("in/rows.jsonl"), lines);
        cluster = StandaloneCluster.start(dir, jobsTarget, flags, 2, 1, "1536m").awaitReady();
    }

    @AfterAll
    static void tearDown() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    @Order(1)
    void theClassPathFilesListSparkMlAndConcatenateIntoExistingJars() throws IOException {
        String provided = Files.readString(jobsTarget.resolve("classpath-provided.txt"));
        String shared = Files.readString(jobsTarget.resolve("classpath-spark-shared.txt"));
        for (String f : List.of(provided, shared)) {
            assertTrue(f.endsWith(File.pathSeparator), "a class path file ends without " + File.pathSeparator);
        }
        assertTrue(
                provided.contains("/spark-mllib_2.13-"),
                "classpath-provided.txt lacks spark-mllib (the Spark ML stages): " + provided);
        String[] entries = (provided + shared).split(File.pathSeparator);
        assertTrue(entries.length > 10, "few entries: " + entries.length);
        for (String e : entries) {
            assertTrue(e.endsWith(".jar") && Files.isRegularFile(Path.of(e)), "not an existing jar: '" + e + "'");
        }
        // The cluster's Spark distribution (made from the two files) has the Spark ML jar.
        try (Stream<Path> jars = Files.list(cluster.home.resolve("jars"))) {
            assertTrue(
                    jars.anyMatch(j -> j.getFileName().toString().startsWith("spark-mllib_2.13-")),
                    "spark-mllib is not among the cluster's jars");
        }
    }

    @Test
    @Order(2)
    void executorsLargerThanAnyWorkerFailTheJobWithinTheWait() throws Exception {
        long wait = 20;
        long t0 = System.nanoTime();
        Path out = dir.resolve("out/too-large");
        Process p = submit(
                "too-large",
                List.of(
                        "spark.executor.cores=4",
                        "spark.executor.memory=8g",
                        "spark.scorch.executorWait=" + wait,
                        "spark.scorch.masterUi=" + cluster.masterUi()),
                out);
        Path log = dir.resolve("logs/too-large.log");
        // Spark's own start takes a few seconds on a loaded machine; without the wait the driver waits for ever.
        if (!p.waitFor(wait + 90, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("the job still waited for executors " + (wait + 90) + " s after it started; see " + log);
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        String text = Files.readString(log);
        assertNotEquals(0, p.exitValue(), "the job succeeded without executors? see " + log);
        assertTrue(text.contains("no executor registered within " + wait + " s (spark.scorch.executorWait)"), text);
        assertTrue(text.contains("executors of 4 cores and 8g (8192 MiB) of memory"), text);
        assertTrue(text.contains("2 alive Workers"), text);
        assertTrue(text.contains("1 cores (1 free), 1536 MiB (1536 MiB free)"), text);
        assertFalse(Files.exists(out.resolve("_SUCCESS")), "an output was written");
        System.out.printf("too-large executors: the job failed after %.1f s (wait %d s)%n", seconds, wait);
    }

    @Test
    @Order(3)
    void twoFilesModeRunsLeaveNoModelCopyInTheWorkersFolders() throws Exception {
        for (String name : List.of("files-1", "files-2")) {
            Path out = dir.resolve("out").resolve(name);
            Process p = submit(name, List.of(), out, "--weights", "files");
            if (!p.waitFor(RUN_LIMIT.toSeconds(), TimeUnit.SECONDS)) {
                p.destroyForcibly();
                fail(name + " did not finish within " + RUN_LIMIT + "; see " + dir.resolve("logs"));
            }
            assertEquals(0, p.exitValue(), name + ": see " + dir.resolve("logs").resolve(name + ".log"));
            assertTrue(Files.exists(out.resolve("_SUCCESS")), name + ": no output");
        }
        // Every file of the model that Spark fetched into an application folder (worker-i/app-*/EXECUTOR/...) under
        // its shipped name (content hash, index, name), plain files only.
        List<Path> copies = new ArrayList<>();
        String first = manifest.contentHash() + "-0-";
        for (int i = 0; i < 2; i++) {
            try (Stream<Path> s = Files.walk(dir.resolve("worker-" + i))) {
                s.filter(q -> q.getFileName().toString().startsWith(first))
                        .filter(q -> Files.isRegularFile(q, LinkOption.NOFOLLOW_LINKS))
                        .forEach(copies::add);
            }
        }
        assertTrue(copies.size() <= 1, "model copies left in the Workers' application folders: " + copies);
        assertTrue(
                Files.isRegularFile(cacheDir.resolve(manifest.contentHash()).resolve(".scorch-complete")),
                "the model was not kept in the model cache " + cacheDir);
        manifest.verify(cacheDir.resolve(manifest.contentHash()));
    }

    /** A score job of input through SparkSubmit (client mode) with the jobs jar, 1-core 1 GiB executors by default. */
    static Process submit(String name, List<String> conf, Path out, String... jobArgs) throws IOException {
        List<String> submit = new ArrayList<>(List.of(
                "--master", cluster.masterUrl(), "--deploy-mode", "client", "--class", "dev.scorch.jobs.ScorchCli"));
        List<String> all = new ArrayList<>(List.of(
                "spark.ui.port=" + StandaloneCluster.freePort(),
                "spark.driver.host=127.0.0.1",
                "spark.driver.bindAddress=127.0.0.1",
                "spark.executor.memory=1g",
                "spark.executor.cores=1",
                "spark.ui.showConsoleProgress=false",
                "spark.scorch.modelCache.dir=" + cacheDir,
                "spark.executor.extraJavaOptions=" + String.join(" ", flags)));
        all.addAll(conf); // later settings win
        for (String c : all) {
            submit.add("--conf");
            submit.add(c);
        }
        submit.add(jobsJar.toString());
        submit.addAll(List.of(
                "score",
                "--model",
                model.toString(),
                "--input",
                input.toString(),
                "--output",
                out.toString(),
                "--partitions",
                "4",
                "--overwrite"));
        submit.addAll(List.of(jobArgs));
        return cluster.launch(
                cluster.sparkJvm("1g", "org.apache.spark.deploy.SparkSubmit", submit),
                Map.of(),
                dir.resolve("logs").resolve(name + ".log"));
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        }
    }
}
