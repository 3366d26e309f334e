package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.score.SparkTests.Scored;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerJobStart;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * How weights reach the tasks: one model load per executor JVM however many tasks, jobs and runs use it;
 * and the broadcast and shared-path modes give the same scores.
 */
class ScoreJobModelShippingTest {
    @TempDir
    static Path tmp;

    static Path input;
    static int rows;

    @BeforeAll
    static void writeInput() {
        List<String> lines = new ArrayList<>();
        Random r = new Random(7);
        for (int i = 0; i < 48; i++) {
            lines.add(SparkTests.row(
                    "r" + i, SparkTests.randomTokens(r, 4 + r.nextInt(28), DemoPreset.TINY.vocabSize())));
        }
        rows = lines.size();
        input = SparkTests.writeJsonl(tmp.resolve("in/rows.jsonl"), lines);
    }

    /** A demo checkpoint whose seed (so content hash) no other test in this JVM uses. */
    static Path freshModel(String name) throws IOException {
        long seed = System.nanoTime() ^ name.hashCode();
        Path dir = tmp.resolve(name);
        new DemoModelWriter(DemoPreset.TINY, false, true, seed).write(dir);
        return dir;
    }

    /** Counts jobs and tasks the shared session runs while it is registered. */
    static final class Counter extends SparkListener {
        final AtomicInteger jobs = new AtomicInteger();
        final AtomicInteger tasks = new AtomicInteger();

        @Override
        public void onJobStart(SparkListenerJobStart e) {
            jobs.incrementAndGet();
        }

        @Override
        public void onTaskEnd(SparkListenerTaskEnd e) {
            tasks.incrementAndGet();
        }
    }

    @Test
    void oneModelLoadPerJvmAcrossTasksJobsAndRuns() throws IOException {
        Path model = freshModel("cache-model");
        Counter counter = new Counter();
        SparkTests.spark().sparkContext().addSparkListener(counter);
        try {
            int before = ExecutorModelCache.loads();
            Path out = tmp.resolve("cache-out");
            // 8 partitions in each of 2 slices: 16 scoring tasks in 2 Spark jobs, all in this JVM.
            ScoreSummary s1 = SparkTests.spec(model, input, out)
                    .partitions(8)
                    .slices(2)
                    .windowRows(4)
                    .run();
            SparkTests.drainListeners();
            assertEquals(rows, s1.rows());
            assertEquals(0, s1.errors());
            assertTrue(counter.tasks.get() >= 16, "expected at least 16 tasks, saw " + counter.tasks.get());
            assertEquals(
                    1, ExecutorModelCache.loads() - before, "the model is loaded once for all tasks of both slices");

            int tasksBefore = counter.tasks.get();
            ScoreSummary s2 = SparkTests.spec(model, input, out)
                    .partitions(8)
                    .overwrite(true)
                    .run();
            SparkTests.drainListeners();
            assertEquals(rows, s2.rows());
            assertTrue(counter.tasks.get() - tasksBefore >= 8, "the second run ran its own tasks");
            assertEquals(
                    1, ExecutorModelCache.loads() - before, "a second run with the same model does not load it again");
        } finally {
            SparkTests.spark().sparkContext().removeSparkListener(counter);
        }
    }

    @Test
    void broadcastSharedPathAndFilesGiveTheSameScores() throws Exception {
        Path model = freshModel("weights-model");
        ModelManifest manifest = ModelManifest.of(model);
        Path cached = ExecutorModelCache.cacheRoot().resolve(manifest.contentHash());
        SparkTests.deleteTree(cached);
        try {
            int before = ExecutorModelCache.loads();
            Path sharedOut = tmp.resolve("shared-out");
            ScoreSummary shared = SparkTests.spec(model, input, sharedOut)
                    .weights("shared-path")
                    .partitions(3)
                    .run();
            assertEquals("shared-path", shared.weights());
            assertEquals(1, ExecutorModelCache.loads() - before);
            assertTrue(!Files.exists(cached), "shared-path maps the folder in place: nothing in the model cache");

            // Forget the loaded model so the broadcast run really assembles and loads its own copy.
            forgetModel(manifest.contentHash());
            Path bcastOut = tmp.resolve("broadcast-out");
            ScoreSummary bcast = SparkTests.spec(model, input, bcastOut)
                    .weights("broadcast")
                    .partitions(3)
                    .run();
            assertEquals("broadcast", bcast.weights());
            assertEquals(2, ExecutorModelCache.loads() - before, "the broadcast run loaded the model from its blocks");
            assertTrue(
                    Files.isRegularFile(cached.resolve("config.json")),
                    "the broadcast blocks were assembled into " + cached);
            manifest.verify(cached); // same files, same bytes

            // And a third way: the folder added with SparkContext.addFile.
            forgetModel(manifest.contentHash());
            Path filesOut = tmp.resolve("files-out");
            ScoreSummary files = SparkTests.spec(model, input, filesOut)
                    .weights("files")
                    .partitions(3)
                    .run();
            assertEquals("files", files.weights());
            assertEquals(3, ExecutorModelCache.loads() - before, "the files run loaded the model from SparkFiles");

            Map<String, Scored> a = SparkTests.readOutput(sharedOut, "parquet");
            Map<String, Scored> b = SparkTests.readOutput(bcastOut, "parquet");
            assertEquals(a, SparkTests.readOutput(filesOut, "parquet"), "files mode gives the same rows");
            assertEquals(rows, a.size());
            assertEquals(a.keySet(), b.keySet());
            for (String id : a.keySet()) {
                Scored x = a.get(id);
                Scored y = b.get(id);
                assertNull(x.error(), id);
                assertNull(y.error(), id);
                assertNotNull(x.tokenLogprobs(), id);
                assertEquals(x.tokenLogprobs(), y.tokenLogprobs(), "token_logprobs of " + id);
                assertEquals(
                        Double.doubleToLongBits(x.sum()), Double.doubleToLongBits(y.sum()), "sum_logprob of " + id);
                assertEquals(x.model(), y.model());
            }
        } finally {
            SparkTests.deleteTree(cached);
        }
    }

    /** Drops a model from this JVM's executor cache. */
    static void forgetModel(String contentHash) {
        assertTrue(ExecutorModelCache.evict(contentHash), "the model was not in the cache");
    }
}
