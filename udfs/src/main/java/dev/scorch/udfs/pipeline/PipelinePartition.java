package dev.scorch.udfs.pipeline;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.udfs.backend.TaskGpus;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.score.ScoreOptions;
import dev.scorch.udfs.score.ScorePartition;
import java.io.IOException;
import java.util.Arrays;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.BarrierTaskInfo;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskKilledException;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One task of a pipelined score: a Spark barrier stage of N tasks, one per node, task i running stage i, a
 * contiguous range of the model's layers ({@link #layers}). The stages connect in a ring over TCP
 * ({@link StageRing}, addresses through {@link BarrierTaskContext#allGather}); the last stage holds every row of the
 * slice, scores them as {@link ScorePartition} does with a {@link PipelineScorer}, and emits the output rows; the
 * others relay hidden states ({@link StageRelay}) and emit none. A failed or killed stage breaks its connections, so
 * every other stage fails too, and Spark reruns the barrier stage as a whole: its rows are written by the attempt
 * that succeeds, and only by it.
 */
public final class PipelinePartition implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(PipelinePartition.class);

    /** Spark setting: how long ring set-up may take once the addresses are exchanged (a Spark duration). */
    public static final String CONNECT_TIMEOUT_CONF = "spark.scorch.pipeline.connectTimeout";
    /** Spark setting: how long a stage waits for its neighbour's next bytes before it fails (a Spark duration). */
    public static final String IDLE_TIMEOUT_CONF = "spark.scorch.pipeline.idleTimeout";

    /**
     * Spark setting: the most batches in the pipeline at once, counting the one the last stage scores (default: the
     * number of stages, so that each can work on one; 1: one stage works at a time). A stage holds at most three
     * batches' hidden states whatever it is; the last stage keeps that many batches' token ids.
     */
    public static final String BATCHES_IN_FLIGHT_CONF = "spark.scorch.pipeline.batchesInFlight";

    /**
     * A window holds this many times the batches in flight (in tokens), so that the ring, which drains at the end of
     * each window, is full for most of it.
     */
    static final int WINDOW_FLIGHTS = 8;

    private final ModelSource source;
    private final ScoreOptions options;
    private final ScorePartition rows;

    public PipelinePartition(ModelSource source, ScoreOptions options, ScorePartition rows) {
        this.source = source;
        this.options = options;
        this.rows = rows;
    }

    /** Stage i's layers [first, end) of n stages over numLayers layers: contiguous, sizes differing by at most one. */
    public static int[] layers(int numLayers, int stages, int i) {
        if (stages < 1 || stages > numLayers) {
            throw new IllegalArgumentException(
                    stages + " pipeline stages for " + numLayers + " layers: each stage needs a layer");
        }
        return new int[] {(int) ((long) i * numLayers / stages), (int) ((long) (i + 1) * numLayers / stages)};
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> input) throws IOException {
        BarrierTaskContext tc = BarrierTaskContext.get();
        BarrierTaskInfo[] tasks = tc.getTaskInfos();
        int n = tasks.length;
        int index = tc.partitionId();
        LoadedModel loaded = ExecutorModelCache.load(source);
        BackendChoice choice = BackendChoice.choose(options.backend(), TaskGpus.of(tc), Cuda::probe);
        List<Integer> gpus = choice.cuda() ? TaskGpus.ordinals(TaskGpus.of(tc), choice.gpuOrdinal()) : List.of(0);
        SparkConf conf = SparkEnv.get().conf();
        StageSplit.Devices mine = choice.cuda()
                ? new StageSplit.Devices(gpus.size(), StageCache.gpuBytes(gpus))
                : new StageSplit.Devices(0, 0);
        int[][] split = StageSplit.of(
                StageSplit.exchange(message -> Arrays.asList(tc.allGather(message)), mine),
                loaded.model().config(),
                options.gpuPrecision(),
                options.maxBatchTokens(),
                d -> ExecutorModelCache.planSettings(d.gpuBytes(), d.gpus(), options.maxBatchTokens(), conf));
        int first = 0;
        for (int i = 0; i < index; i++) {
            first += Arrays.stream(split[i]).sum();
        }
        int[] range = {first, first + Arrays.stream(split[index]).sum()};
        StageEngine engine = StageCache.stage(
                source,
                loaded,
                first,
                split[index],
                gpus,
                choice.cuda(),
                options.gpuPrecision(),
                options.cpuPrecision(),
                options.threads());
        String host = host(tasks[index].address());
        LOG.info(
                "scorch pipeline: stage {} of {} (layers [{}, {}), {}), attempt {} of Spark stage {}, at {}",
                index,
                n,
                range[0],
                range[1],
                choice.cuda() ? "cuda:" + gpus + " layers " + Arrays.toString(split[index]) : "host device",
                tc.stageAttemptNumber(),
                tc.stageId(),
                host);
        StageRing ring = null;
        if (n > 1) {
            int maxTokens =
                    Math.max(options.maxBatchTokens(), loaded.model().config().maxPositionEmbeddings());
            StageRing.Settings s = new StageRing.Settings(
                    index,
                    n,
                    host,
                    loaded.model().config().hiddenSize(),
                    maxTokens,
                    conf.getTimeAsMs(CONNECT_TIMEOUT_CONF, "120s"),
                    conf.getTimeAsMs(IDLE_TIMEOUT_CONF, "30min"));
            ring = StageRing.open(s, message -> Arrays.asList(tc.allGather(message)), () -> {
                if (tc.isInterrupted()) { // Spark killed this task: another stage failed
                    throw new TaskKilledException("pipeline stage " + index + " killed while waiting on the ring");
                }
            });
            StageRing opened = ring;
            tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> opened.close());
        }
        Runnable hook = TestFailure.of(tc.getLocalProperty(TestFailure.PROPERTY), index, tc.stageId());
        if (index < n - 1) {
            if (input.hasNext()) {
                throw new IllegalStateException(
                        "pipeline stage " + index + " of " + n + " was given rows: only the last stage reads them");
            }
            long batches = StageRelay.run(ring, engine, index, hook);
            LOG.info("scorch pipeline: stage {} of {} relayed {} batches", index, n, batches);
            return Collections.emptyIterator();
        }
        int inFlight = conf.getInt(BATCHES_IN_FLIGHT_CONF, n);
        PipelineScorer scorer = new PipelineScorer(ring, engine, inFlight, hook);
        tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> scorer.close());
        return rows.score(
                input,
                loaded,
                scorer,
                options.maxBatchTokens(),
                n > 1 ? (long) WINDOW_FLIGHTS * inFlight * options.maxBatchTokens() : 0,
                "pipeline stage " + index + " of " + n + " (Spark stage " + tc.stageId() + "), " + inFlight
                        + " batches in flight",
                scorer::finish);
    }

    /** The host of Spark's "host:port" task address. */
    static String host(String address) {
        int colon = address.lastIndexOf(':');
        String h = colon < 0 ? address : address.substring(0, colon);
        return h.startsWith("[") && h.endsWith("]") ? h.substring(1, h.length() - 1) : h;
    }
}
