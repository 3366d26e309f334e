package dev.scorch.udfs.api;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeoutException;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.sql.SparkSession;

/**
 * What the API tests share: one local[2] session per test JVM (made again if a test class stopped it), the tiny demo
 * model written once into a temporary folder, the conformance checkpoint, and a listener that counts Spark jobs.
 */
public final class ApiTests {
    private static SparkSession spark;
    private static Path demo;

    private ApiTests() {}

    public static synchronized SparkSession spark() {
        if (spark == null || spark.sparkContext().isStopped()) {
            spark = SparkSession.builder()
                    .master("local[2]")
                    .appName("scorch-udfs-api-tests")
                    .config("spark.ui.enabled", "false")
                    .config("spark.ui.showConsoleProgress", "false")
                    .config("spark.sql.shuffle.partitions", "2")
                    .config("spark.default.parallelism", "2")
                    .config("spark.driver.host", "127.0.0.1")
                    .config("spark.driver.bindAddress", "127.0.0.1")
                    .getOrCreate();
        }
        return spark;
    }

    /** The tiny demo model (random weights, a byte-level BPE tokenizer, vocabulary 512), written on first use. */
    public static synchronized Path demoModel() {
        if (demo == null) {
            try {
                Path dir = Files.createTempDirectory("scorch-api-demo").resolve("demo-tiny");
                new DemoModelWriter(DemoPreset.TINY, false, true, 0).write(dir);
                demo = dir;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return demo;
    }

    public static Path conformanceModel() {
        var url = ApiTests.class.getClassLoader().getResource("conformance/tiny-k2-bf16/model");
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Counts the Spark jobs that start while it listens. */
    public static final class JobCounter extends SparkListener implements AutoCloseable {
        private final List<Integer> jobs = new ArrayList<>();

        public JobCounter() {
            spark().sparkContext().addSparkListener(this);
        }

        @Override
        public synchronized void onJobStart(SparkListenerJobStart e) {
            jobs.add(e.jobId());
        }

        /** Jobs started so far, once the listener bus has delivered every event posted. */
        public int count() {
            drain();
            synchronized (this) {
                return jobs.size();
            }
        }

        @Override
        public void close() {
            spark().sparkContext().removeSparkListener(this);
        }
    }

    static void drain() {
        try {
            spark().sparkContext().listenerBus().waitUntilEmpty(30_000);
        } catch (TimeoutException e) {
            throw new IllegalStateException("Spark listener bus did not drain", e);
        }
    }
}
