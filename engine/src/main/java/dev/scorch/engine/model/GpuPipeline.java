package dev.scorch.engine.model;

import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
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
 * stage runs on a thread of its own; stage k copies micro-batch i's hidden states [T, hidden] into a buffer on stage
 * k + 1's device ({@link Link}: device to device where {@link Device#copyTo} can, else through the host; fp32 either
 * way, so exact) and takes micro-batch i + 1 while stage k + 1 runs i. Every stage runs the same kernels in the same
 * order on a micro-batch as a {@link GpuModel} does, so results are a one-device run's bits wherever the device's
 * kernels give each sequence the same bits whatever else is in its batch (as {@code HostDevice}'s do).
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
    private final List<Link> links = new ArrayList<>(); // links k: stage k's output to stage k + 1
    private final ExecutorService threads;
    private final AtomicInteger active = new AtomicInteger();
    private volatile int maxActive;
    private static final int MICRO_BATCHES_PER_STAGE =
            2; // a call is split into this many per stage, when it has the sequences

    private GpuPipeline(List<DecoderStage> stages, List<Device> devices) {
        this.stages = List.copyOf(stages);
        this.devices = List.copyOf(devices);
        for (int k = 0; k + 1 < stages.size(); k++) {
            links.add(new Link(stages.get(k).device(), stages.get(k + 1).device()));
        }
        AtomicInteger n = new AtomicInteger();
        this.threads = Executors.newFixedThreadPool(stages.size(), r -> {
            Thread t = new Thread(r, "scorch-pipeline-stage-" + n.getAndIncrement());
            t.setDaemon(true);
            return t;
        });
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
     * A pipeline over stages already loaded, of consecutive layers and each on a device of its own: a whole model, or a
     * part of one (a node's share of a longer pipeline, run through {@link #fedFrom}). It owns the stages and their
     * devices and closes them.
     */
    public static GpuPipeline of(List<DecoderStage> stages) {
        List<Device> devs = new ArrayList<>();
        for (int k = 0; k < stages.size(); k++) {
            DecoderStage s = stages.get(k);
            if (k > 0 && s.first() != stages.get(k - 1).end() || devs.contains(s.device())) {
                throw new IllegalArgumentException("stage " + k + " (layers [" + s.first() + ", " + s.end() + ") on "
                        + s.device().describe() + ") does not follow the one before on a device of its own");
            }
            devs.add(s.device());
        }
        if (devs.isEmpty()) {
            throw new IllegalArgumentException("a pipeline needs a stage");
        }
        return new GpuPipeline(stages, devs);
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
    public void run(List<Micro> micro, Finish finish) {
        run(micro, null, finish);
    }

    /**
     * This pipeline as the part of a model after layers run elsewhere: stage 0 starts each micro-batch from in's next
     * T rows [T, hidden] (micro-batches take consecutive rows, in order) rather than from token ids; in null is this
     * pipeline itself.
     */
    public GpuStages fedFrom(float[] in) {
        if (in == null) {
            return this;
        }
        GpuPipeline p = this;
        return new GpuStages() {
            @Override
            public List<DecoderStage> stages() {
                return p.stages();
            }

            @Override
            public int microBatches(int sequences) {
                return p.microBatches(sequences);
            }

            @Override
            public void run(List<Micro> micro, Finish finish) {
                int hidden = config().hiddenSize();
                List<float[]> rows = new ArrayList<>(micro.size());
                int at = 0;
                for (Micro m : micro) {
                    int n = m.batch().numTokens() * hidden;
                    rows.add(Arrays.copyOfRange(in, at, at + n));
                    at += n;
                }
                if (at != in.length) {
                    throw new IllegalArgumentException(
                            "micro-batches of " + at / hidden + " tokens fed from " + in.length / hidden + " rows");
                }
                p.run(micro, rows, finish);
            }
        };
    }

    private synchronized void run(List<Micro> micro, List<float[]> in, Finish finish) {
        int g = stages.size();
        long most = 0;
        for (Micro mb : micro) {
            most = Math.max(most, (long) mb.batch().numTokens() * config().hiddenSize());
        }
        for (Link l : links) {
            l.reserve(most); // here, while no stage works on the devices
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicReference<Integer> failedStage = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(g);
        for (int k = 0; k < g; k++) {
            int stage = k;
            threads.execute(() -> {
                try {
                    runStage(stage, micro, in, finish, failure);
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
    }

    /** Stage k's loop: every micro-batch in order, taking its input from stage k - 1 and handing its output on. */
    private void runStage(int k, List<Micro> micro, List<float[]> in, Finish finish, AtomicReference<Throwable> failure)
            throws InterruptedException {
        DecoderStage st = stages.get(k);
        Link from = k == 0 ? null : links.get(k - 1);
        Link to = k == stages.size() - 1 ? null : links.get(k);
        for (int i = 0; i < micro.size(); i++) {
            float[] host = k == 0 && in != null ? in.get(i) : null;
            Link.Sent handed = from == null ? null : from.receive(failure);
            Buf out = to == null ? null : to.acquire(failure);
            if ((from != null && handed == null) || (to != null && out == null) || failure.get() != null) {
                return; // another stage failed
            }
            Micro mb = micro.get(i);
            int index = i;
            Buf h = handed == null ? null : handed.hidden();
            if (to == null) {
                counted(() -> st.forward(mb.at(k, host, h), x -> {
                    finish.apply(index, st, st.own(), x);
                    return null;
                }));
            } else {
                to.send(counted(() -> st.forward(mb.at(k, host, h), x -> to.fill(out, x))));
            }
            if (handed != null) {
                from.release(handed);
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

    /**
     * Hidden states [T, hidden] from one stage's device to the next one's: the sender copies its output into one of
     * three buffers on the receiver's device ({@link Device#copyTo}, or reads it back to the host where the devices have
     * no direct path, for the receiver to write in), so the sender runs micro-batch i + 2 while i + 1 waits and the
     * receiver runs i.
     */
    private static final class Link {
        private static final int BUFFERS = 3;
        private final Device from;
        private final Device to;
        private final BlockingQueue<Buf> free = new ArrayBlockingQueue<>(BUFFERS);
        private final BlockingQueue<Sent> sent = new ArrayBlockingQueue<>(BUFFERS);
        private final Buf[] bufs = new Buf[BUFFERS]; // on to, [capacity] each
        private long capacity = -1;

        /** A hand-off: hidden [T, hidden], a slice of buf; host holds its floats where they came through the host. */
        record Sent(Buf buf, Buf hidden, float[] host) {}

        Link(Device from, Device to) {
            this.from = from;
            this.to = to;
        }

        /** Empties the link for a call whose hand-offs are at most n floats (a failed call may have left some). */
        void reserve(long n) {
            if (n > capacity) {
                close();
                for (int b = 0; b < BUFFERS; b++) {
                    bufs[b] = to.alloc(Buf.Kind.F32, n);
                }
                capacity = n;
            }
            free.clear();
            sent.clear();
            free.addAll(Arrays.asList(bufs));
        }

        /** The sender's side, before its forward: a free buffer, or null once a stage failed. */
        Buf acquire(AtomicReference<Throwable> failure) throws InterruptedException {
            return take(free, failure);
        }

        /** The sender's side, while h [T, hidden] is valid: h into buf (from {@link #acquire}). */
        Sent fill(Buf buf, Buf h) {
            Buf hidden = buf.slice(0, h.length());
            if (from.copyTo(h, to, hidden, h.length())) {
                return new Sent(buf, hidden, null);
            }
            float[] host = new float[Math.toIntExact(h.length())];
            from.read(h, host, 0, host.length);
            return new Sent(buf, hidden, host);
        }

        /** The sender's side, after its forward: never waits (there are as many places as buffers). */
        void send(Sent s) {
            sent.add(s);
        }

        /** The receiver's side: the next hand-off, on its device, or null once a stage failed. */
        Sent receive(AtomicReference<Throwable> failure) throws InterruptedException {
            Sent s = take(sent, failure);
            if (s != null && s.host() != null) {
                to.write(s.hidden(), s.host(), 0, s.host().length);
            }
            return s;
        }

        /** Gives a received hand-off's buffer back after the receiver's forward (once its device has read it). */
        void release(Sent s) {
            to.synchronize();
            free.add(s.buf());
        }

        void close() {
            for (int b = 0; b < bufs.length; b++) {
                if (bufs[b] != null) {
                    to.free(bufs[b]);
                    bufs[b] = null;
                }
            }
            capacity = -1;
        }
    }

    /** The next item of q, or null once another stage has failed. */
    private static <T> T take(BlockingQueue<T> q, AtomicReference<Throwable> failure) throws InterruptedException {
        while (failure.get() == null) {
            T x = q.poll(POLL_MILLIS, TimeUnit.MILLISECONDS);
            if (x != null) {
                return x;
            }
        }
        return null;
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
        for (Link l : links) {
            try {
                l.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            }
        }
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
