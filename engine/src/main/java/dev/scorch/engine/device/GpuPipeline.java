package dev.scorch.engine.device;

import dev.scorch.engine.backend.GpuPlan;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.model.ModelWeights;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The model over several devices: contiguous layer ranges, one {@link DecoderStage} per device (embed_tokens on the first,
 * model.norm and lm_head on the last), and micro-batches flowing through them so every device works at once. Each
 * stage runs on a thread of its own; stage k hands micro-batch i's hidden states [T, hidden] to stage k + 1 through
 * a bounded queue (fp32 through the host: exact, and 4 · hidden bytes a token beside a layer's compute) and takes
 * micro-batch i + 1 while stage k + 1 runs i. Every stage runs the same kernels in the same order on a micro-batch as
 * a {@link GpuModel} does, so results are a one-device run's bits wherever the device's kernels give each sequence
 * the same bits whatever else is in its batch (as {@link HostDevice}'s do).
 *
 * <p>One call runs at a time (the stages' scratch arenas serve one micro-batch each); a failure in any stage stops
 * every stage at its next hand-off and fails the call with that stage's exception as the cause.
 */
public final class GpuPipeline implements GpuStages, AutoCloseable {
    /** How often a stage waiting on a hand-off looks whether another stage failed. */
    private static final long POLL_MILLIS = 20;

    /** The micro-batch a budget split keeps scratch for (gpu-budget --plan's default). */
    public static final int MICRO_BATCH_TOKENS = 4096;

    private final List<DecoderStage> stages;
    private final List<Device> devices;
    private final ExecutorService threads;
    private final AtomicInteger active = new AtomicInteger();
    private volatile int maxActive;
    private static final int MICRO_BATCHES_PER_STAGE =
            2; // a call is split into this many per stage, when it has the sequences

    private GpuPipeline(List<DecoderStage> stages, List<Device> devices) {
        this.stages = List.copyOf(stages);
        this.devices = List.copyOf(devices);
        AtomicInteger n = new AtomicInteger();
        this.threads = Executors.newFixedThreadPool(stages.size(), r -> {
            Thread t = new Thread(r, "scorch-pipeline-stage-" + n.getAndIncrement());
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Uploads the model over devs, layers placed by the memory budget ({@link #planSplit}) as if every device had the
     * smallest one's memory, for micro-batches of up to MICRO_BATCH_TOKENS tokens; the pipeline owns the devices and
     * closes them.
     */
    public static GpuPipeline load(ModelWeights w, List<Device> devs, GemmPrecision precision) {
        long smallest = Long.MAX_VALUE;
        for (Device d : devs) {
            smallest = Math.min(smallest, d.totalBytes());
        }
        GpuPlan.Settings s = new GpuPlan.Settings(smallest, devs.size(), 0, 0, MICRO_BATCH_TOKENS);
        return load(w, devs, precision, planSplit(w.config(), precision, s));
    }

    /**
     * Uploads the model over devs, stage k holding layers[k] consecutive layers (their sum is num_hidden_layers; a
     * stage may hold none: the embedding or lm_head alone). The pipeline owns the devices and closes them; when loading
     * fails they stay the caller's.
     */
    public static GpuPipeline load(ModelWeights w, List<Device> devs, GemmPrecision precision, int[] layers) {
        int n = w.config().numHiddenLayers();
        if (devs.isEmpty()
                || layers.length != devs.size()
                || Arrays.stream(layers).anyMatch(l -> l < 0)
                || Arrays.stream(layers).sum() != n) {
            throw new IllegalArgumentException("a split of " + n + " layers over " + devs.size() + " devices needs "
                    + devs.size() + " counts >= 0 summing to " + n + ", got " + Arrays.toString(layers));
        }
        List<DecoderStage> stages = new ArrayList<>();
        try {
            int first = 0;
            for (int k = 0; k < layers.length; k++) {
                stages.add(DecoderStage.load(
                        w, devs.get(k), precision, first, first + layers[k], k == 0, k == layers.length - 1));
                first += layers[k];
            }
        } catch (RuntimeException | Error e) {
            for (DecoderStage s : stages) {
                s.close(); // frees what was uploaded; the devices stay the caller's, as when GpuModel.load fails
            }
            throw e;
        }
        return new GpuPipeline(stages, devs);
    }

    /**
     * Layers per device for one node of settings' GPUs ({@link GpuPlan.Settings#gpusPerNode} of them), as {@link GpuPlan}
     * places them: weights as the checkpoint stores them, the margins and a micro-batch's scratch on every GPU, the rest
     * KV cache; the split that leaves the most KV tokens, then the fewest layers on the busiest GPU. GPUs the plan leaves
     * empty get no layers. Throws when one node's GPUs do not hold the model.
     */
    public static int[] planSplit(ModelConfig c, GemmPrecision precision, GpuPlan.Settings settings) {
        GpuPlan plan = GpuPlan.of(c, precision, settings);
        if (plan.nodes() > 1) {
            throw new IllegalArgumentException(String.format(
                    "the model needs %d devices of %.1f GB; %d given",
                    plan.gpusNeeded(), settings.gpuBytes() / 1e9, settings.gpusPerNode()));
        }
        int[] layers = new int[settings.gpusPerNode()];
        for (GpuPlan.Stage s : plan.stages()) {
            layers[s.gpu()] = s.layers();
        }
        return layers;
    }

    @Override
    public ModelConfig config() {
        return stages.get(0).config();
    }

    @Override
    public List<DecoderStage> stages() {
        return stages;
    }

    /** Layers per stage, in order. */
    public int[] split() {
        return stages.stream().mapToInt(s -> s.end() - s.first()).toArray();
    }

    @Override
    public int microBatches(int sequences) {
        return Math.min(sequences, MICRO_BATCHES_PER_STAGE * stages.size());
    }

    /** The most stages seen inside a forward at once since this pipeline was made (a test hook, and a figure). */
    public int maxConcurrentStages() {
        return maxActive;
    }

    @Override
    public synchronized <R> List<R> run(List<Micro> micro, Finish<R> finish) {
        int g = stages.size();
        int m = micro.size();
        Object[] results = new Object[m];
        List<BlockingQueue<float[]>> handoff = new ArrayList<>(); // handoff k: stage k's output to stage k + 1
        for (int k = 0; k + 1 < g; k++) {
            handoff.add(new ArrayBlockingQueue<>(1));
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicReference<Integer> failedStage = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(g);
        for (int k = 0; k < g; k++) {
            int stage = k;
            threads.execute(() -> {
                try {
                    runStage(stage, micro, finish, results, handoff, failure);
                } catch (Throwable e) {
                    if (failure.compareAndSet(null, e)) {
                        failedStage.set(stage);
                    }
                } finally {
                    done.countDown();
                }
            });
        }
        boolean interrupted = false;
        while (true) {
            try {
                done.await();
                break;
            } catch (InterruptedException e) {
                interrupted = true; // stop the stages, then wait for them: none may outlive the call
                failure.compareAndSet(null, e);
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        Throwable e = failure.get();
        if (e != null) {
            Integer k = failedStage.get();
            String where = k == null
                    ? "interrupted"
                    : "stage " + k + " (layers [" + stages.get(k).first() + ", "
                            + stages.get(k).end() + ") on "
                            + stages.get(k).device().describe() + ") failed: " + e;
            throw new PipelineFailure("pipeline of " + g + " stages: " + where, e);
        }
        List<R> out = new ArrayList<>(m);
        for (Object r : results) {
            @SuppressWarnings("unchecked")
            R cast = (R) r;
            out.add(cast);
        }
        return out;
    }

    /** Stage k's loop: every micro-batch in order, taking its input from stage k - 1 and handing its output on. */
    private <R> void runStage(
            int k,
            List<Micro> micro,
            Finish<R> finish,
            Object[] results,
            List<BlockingQueue<float[]>> handoff,
            AtomicReference<Throwable> failure)
            throws InterruptedException {
        DecoderStage st = stages.get(k);
        boolean last = k == stages.size() - 1;
        for (int i = 0; i < micro.size(); i++) {
            float[] in = k == 0 ? null : take(handoff.get(k - 1), failure);
            if (in == null && k > 0) {
                return; // another stage failed
            }
            if (failure.get() != null) {
                return;
            }
            Micro mb = micro.get(i);
            int index = i;
            if (last) {
                results[i] = counted(
                        () -> st.forward(mb.batch(), mb.stage(k), mb.routes(), in, h -> finish.apply(index, st, h)));
            } else if (!put(
                    handoff.get(k),
                    counted(() -> st.forward(mb.batch(), mb.stage(k), mb.routes(), in, st::read)),
                    failure)) {
                return;
            }
        }
    }

    /** Runs a stage's forward, counted among the stages inside one. */
    private <T> T counted(java.util.function.Supplier<T> forward) {
        int now = active.incrementAndGet();
        if (now > maxActive) {
            maxActive = now; // a racy max: exact enough to tell whether stages overlapped
        }
        try {
            return forward.get();
        } finally {
            active.decrementAndGet();
        }
    }

    /** The next hand-off, or null once another stage has failed. */
    private static float[] take(BlockingQueue<float[]> q, AtomicReference<Throwable> failure)
            throws InterruptedException {
        while (failure.get() == null) {
            float[] x = q.poll(POLL_MILLIS, TimeUnit.MILLISECONDS);
            if (x != null) {
                return x;
            }
        }
        return null;
    }

    /** Hands x on; false once another stage has failed. */
    private static boolean put(BlockingQueue<float[]> q, float[] x, AtomicReference<Throwable> failure)
            throws InterruptedException {
        while (failure.get() == null) {
            if (q.offer(x, POLL_MILLIS, TimeUnit.MILLISECONDS)) {
                return true;
            }
        }
        return false;
    }

    /** A pipeline call that failed: the cause is the failing stage's exception. */
    public static final class PipelineFailure extends RuntimeException {
        PipelineFailure(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** Frees every stage's weights and scratch, stops the stage threads and closes the devices. */
    @Override
    public synchronized void close() {
        threads.shutdownNow();
        RuntimeException first = null;
        for (DecoderStage s : stages) {
            try {
                s.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        for (Device d : devices) {
            try {
                d.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
