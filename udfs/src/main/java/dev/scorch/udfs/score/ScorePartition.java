package dev.scorch.udfs.score;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.backend.GpuMemoryBudget;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.model.DecoderStage;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.GpuStages;
import dev.scorch.engine.runtime.TokenBudgetBatcher;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.PrefixSharingScorer;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.TokenizerException;
import dev.scorch.udfs.backend.TaskGpus;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.progress.LocalProgress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.NoSuchElementException;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.TaskContext$;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The score job's partition engine. It streams its partition a window at a time, never collecting it:
 * the window's rows are written into Arrow vectors (off-heap, from a per-task allocator capped at
 * {@code arrowMemoryBytes}); token ids are checked in place (a bad row becomes an error row); good rows are
 * sorted by length and cut into token-budget batches for the engine; results go into Arrow output
 * vectors that Spark reads as a columnar batch, but for a row whose scores are not all finite (NaN or Inf weights or
 * config values), which becomes an error row. Every input row yields exactly one output row.
 *
 * <p>Each task picks its backend ({@link BackendChoice#choose}: the options' mode, the task's GPU addresses, CUDA's
 * availability) and logs it once. On the CPU it scores with the executor's shared model and thread pool; on CUDA
 * with the executor's shared GPU model for the task's GPUs and precision (a task owning several GPUs runs the model as
 * a pipeline over all of them), its batches capped at what the GPUs' free memory holds ({@link #gpuBatchTokens}).
 * Scores do not depend on the batch size, so the cap never changes a result.
 */
public final class ScorePartition implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(ScorePartition.class);

    private final ModelSource source;
    private final ScoreOptions options;
    private final StructType inputSchema;
    private final StructType outputSchema;
    private final String modelLabel;
    private final JobMetrics metrics;
    private final long arrowMemoryBytes;

    public ScorePartition(
            ModelSource source,
            ScoreOptions options,
            StructType inputSchema,
            StructType outputSchema,
            String modelLabel,
            JobMetrics metrics,
            long arrowMemoryBytes) {
        this.source = source;
        this.options = options;
        this.inputSchema = inputSchema;
        this.outputSchema = outputSchema;
        this.modelLabel = modelLabel;
        this.metrics = metrics;
        this.arrowMemoryBytes = arrowMemoryBytes;
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> input) {
        TaskContext tc = TaskContext.get();
        // Tests only (TestOnlyHold): a fault test may hold this task's first attempt; unset, rows pass as they are.
        return TestOnlyHold.around(call(input, tc, TaskGpus.of(tc), Cuda::probe, BackendChoice::cudaDevice), tc);
    }

    /**
     * As {@link #call(Iterator)} for task tc (null outside Spark), given its GPU addresses, CUDA's availability and what
     * opens a device of an ordinal (tests run the GPU path on HostDevices).
     */
    Iterator<InternalRow> call(
            Iterator<InternalRow> input,
            TaskContext tc,
            List<String> gpuAddresses,
            Supplier<Cuda.Availability> cuda,
            IntFunction<? extends Device> devices) {
        LoadedModel loaded = ExecutorModelCache.load(source);
        BackendChoice choice = BackendChoice.choose(options.backend(), gpuAddresses, cuda);
        BatchScorer scorer;
        int maxBatchTokens;
        long windowTokens; // a window's target: two full batches on a GPU (see WindowSizer)
        String on;
        if (choice.cuda()) {
            List<Integer> gpus = TaskGpus.ordinals(gpuAddresses, choice.gpuOrdinal());
            Scorer gpu = ExecutorModelCache.gpuScorer(source, gpus, options.gpuPrecision(), devices);
            scorer = gpu;
            maxBatchTokens = gpuBatchTokens(gpu.stages(), options.maxBatchTokens(), options.gpuBatchTokens());
            windowTokens = 2L * maxBatchTokens;
            on = onGpus(gpus, gpu.stages(), options.gpuPrecision());
        } else {
            scorer = options.sharePrefixes()
                    ? new PrefixSharingScorer(
                            loaded.model(), ExecutorModelCache.ops(options.threads(), options.cpuPrecision()))
                    : new Scorer(loaded.model().on(ExecutorModelCache.ops(options.threads(), options.cpuPrecision())));
            maxBatchTokens = options.maxBatchTokens();
            windowTokens = 0;
            on = "cpu, " + options.threads() + " thread(s)" + (options.sharePrefixes() ? ", shared prefixes" : "");
        }
        String task = tc == null
                ? "(no task)"
                : "stage " + tc.stageId() + " partition " + tc.partitionId() + " TID " + tc.taskAttemptId();
        LOG.info(
                "scorch score task {}: backend {} ({}); batches of up to {} tokens, windows of at least {} rows{}",
                task,
                on,
                choice.reason(),
                maxBatchTokens,
                options.windowRows(),
                windowTokens > 0 ? " and " + windowTokens + " tokens" : "");
        return score(input, loaded, scorer, maxBatchTokens, windowTokens, task + " on " + on, () -> {});
    }

    /**
     * The partition's output rows, scored by scorer in batches of up to maxBatchTokens tokens, in windows of at least
     * the options' rows (and windowTokens tokens, when not 0); label names the task in messages. atEnd runs once, when
     * the last row has been scored (a pipeline's last stage tells the other stages there is no more). Every other step
     * (row checks, tokenizing, batching, error rows, Arrow output) is the one {@link #call} takes.
     */
    public Iterator<InternalRow> score(
            Iterator<InternalRow> input,
            LoadedModel loaded,
            BatchScorer scorer,
            int maxBatchTokens,
            long windowTokens,
            String label,
            Runnable atEnd) {
        return score(input, loaded, scorer, maxBatchTokens, windowTokens, label, atEnd, readAhead());
    }

    /** As above, reading each window ahead while the one before is scored or not (tests run both). */
    Iterator<InternalRow> score(
            Iterator<InternalRow> input,
            LoadedModel loaded,
            BatchScorer scorer,
            int maxBatchTokens,
            long windowTokens,
            String label,
            Runnable atEnd,
            boolean readAhead) {
        TaskContext tc = TaskContext.get();
        Window w = new Window(
                loaded.model(),
                loaded.tokenizer().orElse(null),
                scorer,
                maxBatchTokens,
                new WindowSizer(options.windowRows(), windowTokens, arrowMemoryBytes),
                label,
                tc,
                readAhead);
        if (tc != null) {
            tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> w.close());
        }
        return new Iterator<>() {
            private Iterator<InternalRow> current = Collections.emptyIterator();
            private boolean drained; // the window after the last row was read (empty)
            private boolean ended;

            @Override
            public boolean hasNext() {
                while (!current.hasNext() && !drained) {
                    Iterator<InternalRow> rows;
                    try {
                        rows = w.next(input);
                    } catch (RuntimeException | Error e) {
                        w.close(); // at once, not at the task's end: a read ahead may still hold its buffers
                        throw e;
                    }
                    drained = rows == null;
                    current = drained ? current : rows;
                }
                if (!current.hasNext()) {
                    w.close();
                    if (!ended) {
                        ended = true;
                        atEnd.run();
                    }
                }
                return current.hasNext();
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return current.next();
            }
        };
    }

    /** Spark setting: whether a score task reads its next window while the engine scores one (default true). */
    public static final String READ_AHEAD_CONF = "spark.scorch.score.readAhead";

    /** This executor's {@value #READ_AHEAD_CONF}. */
    static boolean readAhead() {
        SparkEnv env = SparkEnv.get();
        return env == null || env.conf().getBoolean(READ_AHEAD_CONF, true);
    }

    /**
     * Where a CUDA task runs, for its log lines: "cuda:0 bf16x3", or over several GPUs "cuda:0,1,2 bf16x3, pipeline of
     * layers 1/1/1".
     */
    public static String onGpus(List<Integer> ordinals, GpuStages stages, GemmPrecision precision) {
        StringJoiner gpus =
                new StringJoiner(",", "cuda:", " " + precision.name().toLowerCase(Locale.ROOT));
        for (int o : new java.util.TreeSet<>(ordinals)) { // the stages' order (ExecutorModelCache.gpuScorer)
            gpus.add(Integer.toString(o));
        }
        StringJoiner layers = new StringJoiner("/", ", pipeline of layers ", "");
        for (DecoderStage st : stages.stages()) {
            layers.add(Integer.toString(st.end() - st.first()));
        }
        return stages.stages().size() == 1 ? gpus.toString() : gpus + layers.toString();
    }

    /**
     * The token budget of a task's batches on a loaded GPU model or pipeline: the asked budget raised to minTokens (a
     * forward that fills the device), capped by the largest batch whose scratch
     * ({@link GpuMemoryBudget#maxBatchTokensBesideWeights}) fits in every stage's device: its free memory plus the
     * scratch the stage already holds (a forward reuses it). Read between forward passes, as the model's tasks take
     * turns. A row longer than the cap still gets a batch of its own. Fails when not even a one-token batch fits.
     *
     * <p>On a pipeline the cap is the tightest stage's, for the whole batch: a stage runs one micro-batch at a time,
     * but micro-batches are runs of whole sequences, so one can be the whole batch (a batch of one long row). Each
     * stage is counted as the whole model's scratch ({@link GpuMemoryBudget} counts one device's pass), an upper
     * bound for a stage of some layers. A pipeline's micro-batches are then about a {@code microBatches}-th of the
     * batch: raise minTokens (--gpu-batch-tokens) to fill the stages.
     */
    static int gpuBatchTokens(GpuStages stages, int asked, int minTokens) {
        int fit = Integer.MAX_VALUE;
        DecoderStage tightest = null;
        long tightestFree = 0;
        for (DecoderStage st : stages.stages()) {
            GpuMemoryBudget budget = GpuMemoryBudget.of(
                    stages.config(), st.precision(), st.device().batchesGroups());
            long free;
            synchronized (stages) { // a forward holds this lock (GpuModel, GpuPipeline): no arena grows while we read
                free = st.device().freeBytes() + st.scratchBytes();
            }
            int f = budget.maxBatchTokensBesideWeights(free);
            if (f < fit) {
                fit = f;
                tightest = st;
                tightestFree = free;
            }
        }
        if (fit < 1) {
            GpuMemoryBudget budget = GpuMemoryBudget.of(
                    stages.config(), tightest.precision(), tightest.device().batchesGroups());
            String where = stages.stages().size() == 1
                    ? tightest.device().describe()
                    : "pipeline stage of layers [" + tightest.first() + ", " + tightest.end() + ") on "
                            + tightest.device().describe();
            throw new IllegalStateException(
                    where + ": " + (tightestFree >> 20) + " MiB free beside the weights, less than a"
                            + " one-token batch needs (" + (budget.activationBytes(1) >> 20) + " MiB scratch + "
                            + (GpuMemoryBudget.DEFAULT_RESERVE_BYTES >> 20)
                            + " MiB reserve): lower the RAPIDS pool (spark.rapids.memory.gpu.allocFraction) or run fewer models per GPU");
        }
        return Math.min(Math.max(asked, minTokens), fit);
    }

    /** One task's Arrow buffers, reused window after window. */
    private final class Window implements AutoCloseable {
        private final DeepseekV3Model model;
        private final Tokenizer tokenizer; // null when the checkpoint ships none: text rows then get an error
        private final BatchScorer scorer;
        private final int maxBatchTokens;
        private final WindowSizer sizer;
        private final String label; // the task and backend, for the closing log line
        private final long start = System.nanoTime(); // the partition's streaming began (model loaded)
        private long engineNanos; // this task's time inside the engine's score calls
        private final BufferAllocator allocator;
        private final InputBuffer[] buffers; // two when reading ahead: one scored while the other is filled
        private final TaskContext tc; // null outside Spark
        private CompletableFuture<Read> pending; // the next window, being read
        private Thread reader; // the thread reading it
        private final ArrowScoreOutput out;
        /** Each batch's scores, kept from window to window (filled again rather than made again). */
        private final List<BatchScores> kept = new ArrayList<>();

        private final UnsafeProjection toUnsafe;
        private boolean closed;

        Window(
                DeepseekV3Model model,
                Tokenizer tokenizer,
                BatchScorer scorer,
                int maxBatchTokens,
                WindowSizer sizer,
                String label,
                TaskContext tc,
                boolean readAhead) {
            this.model = model;
            this.tokenizer = tokenizer;
            this.scorer = scorer;
            this.maxBatchTokens = maxBatchTokens;
            this.sizer = sizer;
            this.label = label;
            this.allocator = ArrowUtils.rootAllocator().newChildAllocator("scorch-score-task", 0, arrowMemoryBytes);
            this.tc = tc;
            this.buffers = readAhead
                    ? new InputBuffer[] {new InputBuffer(), new InputBuffer()}
                    : new InputBuffer[] {new InputBuffer()};
            this.out = new ArrowScoreOutput(outputSchema, allocator, modelLabel);
            this.toUnsafe = UnsafeProjection.create(outputSchema);
        }

        /** The rows of one window in Arrow vectors, and the writer that fills them. */
        private final class InputBuffer implements AutoCloseable {
            final VectorSchemaRoot in =
                    VectorSchemaRoot.create(ArrowUtils.toArrowSchema(inputSchema, "UTC", true, false), allocator);
            final ArrowWriter writer = ArrowWriter.create(in);

            @Override
            public void close() {
                in.close();
            }
        }

        /** A window read and checked, not yet scored: its rows [0, n) in in, the good ones tokenized. */
        private record Read(
                InputBuffer in,
                int n,
                String[] errors,
                int[][] tokens,
                int[] scoreFrom,
                int[] sharedPrefix,
                List<Integer> good) {}

        /**
         * The next window's output rows (copied out of the buffers), or null once the input is drained. Reading ahead,
         * the window after it is read on a thread of its own while this one is scored, so the engine does not wait
         * for rows to be read, checked and tokenized between windows. The input is only ever read by one thread at a
         * time: the task's reads it again only once the window read ahead is done.
         */
        Iterator<InternalRow> next(Iterator<InternalRow> input) {
            Read r = pending != null ? join() : read(input, buffers[0]);
            if (r.n() == 0) {
                return null;
            }
            if (buffers.length == 2) {
                readAhead(input, r.in() == buffers[0] ? buffers[1] : buffers[0]);
            }
            return score(r);
        }

        private void readAhead(Iterator<InternalRow> input, InputBuffer into) {
            CompletableFuture<Read> f = new CompletableFuture<>();
            Thread t = new Thread(
                    () -> {
                        if (tc != null) { // Spark's input iterators find their task through it, as on the task's thread
                            TaskContext$.MODULE$.setTaskContext(tc);
                        }
                        try {
                            f.complete(read(input, into));
                        } catch (Throwable e) {
                            f.completeExceptionally(e);
                        } finally {
                            TaskContext$.MODULE$.unset();
                        }
                    },
                    "scorch-score-reader-" + label);
            t.setDaemon(true);
            pending = f;
            reader = t;
            t.start();
        }

        private Read join() {
            try {
                return pending.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for the next window's rows", e);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof RuntimeException r) {
                    throw r;
                }
                if (e.getCause() instanceof Error err) {
                    throw err;
                }
                throw new IllegalStateException(e.getCause());
            } finally {
                pending = null;
            }
        }

        /** Reads up to the sizer's rows into buffer b, checks them and tokenizes text rows. */
        private Read read(Iterator<InternalRow> input, InputBuffer b) {
            b.writer.reset();
            int n = 0;
            int limit = sizer.nextRows();
            while (n < limit && input.hasNext()) {
                b.writer.write(input.next());
                n++;
            }
            b.writer.finish();
            VectorSchemaRoot in = b.in;
            ListVector tokenIds = (ListVector) in.getVector(ScoreSchema.TOKEN_IDS);
            VarCharVector prompt = (VarCharVector) in.getVector(ScoreSchema.PROMPT);
            VarCharVector continuation = (VarCharVector) in.getVector(ScoreSchema.CONTINUATION);
            VarCharVector where = (VarCharVector) in.getVector(ScoreSchema.SOURCE);
            VarCharVector inputError = (VarCharVector) in.getVector(ScoreSchema.INPUT_ERROR);
            IntVector scoreFromCol = (IntVector) in.getVector(ScoreSchema.SCORE_FROM);
            IntVector sharedPrefixCol = (IntVector) in.getVector(ScoreSchema.SHARED_PREFIX);

            // Check every row; keep the good ones' tokens by row index.
            String[] errors = new String[n];
            int[][] tokens = new int[n][];
            int[] scoreFrom = new int[n]; // first scored token: 1, or the prompt's length for a continuation
            int[] sharedPrefix = new int[n]; // 0, or where a prefix shared with other rows ends
            List<Integer> good = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                if (!inputError.isNull(i)) {
                    errors[i] = inputError.getObject(i)
                            + (where.isNull(i) ? "" : " (input row " + where.getObject(i) + ")");
                } else if (tokenIds.isNull(i) && !prompt.isNull(i)) {
                    errors[i] = tokenizeText(prompt, continuation, i, tokens, scoreFrom);
                    if (errors[i] == null) {
                        good.add(i);
                    }
                } else {
                    Object checked = RowCheck.tokens(
                            tokenIds, i, model.vocabSize(), model.config().maxPositionEmbeddings());
                    int from = scoreFromCol.isNull(i) ? 1 : scoreFromCol.get(i);
                    int shared = sharedPrefixCol.isNull(i) ? 0 : sharedPrefixCol.get(i);
                    if (checked instanceof String err) {
                        errors[i] = err;
                    } else if (from < 1 || from > ((int[]) checked).length) {
                        errors[i] = "score_from " + from + " outside [1, " + ((int[]) checked).length
                                + "], the row's tokens";
                    } else if (shared < 0 || shared > ((int[]) checked).length) {
                        errors[i] = "shared_prefix " + shared + " outside [0, " + ((int[]) checked).length
                                + "], the row's tokens";
                    } else {
                        tokens[i] = (int[]) checked;
                        scoreFrom[i] = from;
                        sharedPrefix[i] = shared;
                        good.add(i);
                    }
                }
            }
            return new Read(b, n, errors, tokens, scoreFrom, sharedPrefix, good);
        }

        /** Scores a read window's good rows and returns one output row per input row (copied out of the buffers). */
        private Iterator<InternalRow> score(Read r) {
            int n = r.n();
            String[] errors = r.errors();
            int[][] tokens = r.tokens();
            int[] scoreFrom = r.scoreFrom();
            List<Integer> good = r.good();
            FieldVector ids = r.in().in.getVector(ScoreSchema.ID);
            VarCharVector where = (VarCharVector) r.in().in.getVector(ScoreSchema.SOURCE);

            // Score the good rows in token-budget batches of similar lengths (in token order when prefixes are shared),
            // all of the window's at once (a pipeline
            // keeps several in flight): batch k's scores go to kept[k], and row i's are sequence seqOf[i] of batch
            // batchOf[i].
            int[] batchOf = new int[n];
            int[] seqOf = new int[n];
            List<List<ScoreRequest>> batches = new ArrayList<>();
            long batchTokens = 0;
            List<List<Integer>> cut = scorer instanceof PrefixSharingScorer
                    ? TokenBudgetBatcher.bySharedPrefix(good, i -> tokens[i], maxBatchTokens)
                    : TokenBudgetBatcher.batches(good, i -> tokens[i].length, maxBatchTokens);
            for (List<Integer> batch : cut) {
                List<ScoreRequest> reqs = new ArrayList<>(batch.size());
                for (int b = 0; b < batch.size(); b++) {
                    int i = batch.get(b);
                    reqs.add(new ScoreRequest(
                            tokens[i], scoreFrom[i], options.topK(), options.logits(), r.sharedPrefix()[i]));
                    batchTokens += tokens[i].length;
                    batchOf[i] = batches.size();
                    seqOf[i] = b;
                }
                if (kept.size() == batches.size()) {
                    kept.add(new BatchScores());
                }
                batches.add(reqs);
            }
            long t0 = System.nanoTime();
            scorer.scoreAll(batches, kept.subList(0, batches.size()));
            long took = System.nanoTime() - t0;
            engineNanos += took;
            metrics.engineNanos().add(took);
            metrics.batches().add(batches.size());
            metrics.tokens().add(batchTokens);

            // One output row per input row, in input order; a row whose scores are not all finite becomes an error row.
            out.reset();
            int failed = 0;
            for (int i = 0; i < n; i++) {
                if (errors[i] == null) {
                    errors[i] = RowCheck.scores(kept.get(batchOf[i]), seqOf[i], options.logits());
                }
                if (errors[i] == null) {
                    out.scored(i, ids, i, tokens[i], kept.get(batchOf[i]), seqOf[i]);
                } else {
                    out.failed(i, ids, i, errors[i]);
                    failed++;
                }
                out.source(i, where, i);
            }
            metrics.rows().add(n);
            metrics.errors().add(failed);
            long windowTokens = 0;
            for (int i : good) {
                windowTokens += tokens[i].length;
            }
            LocalProgress.add(n, windowTokens, failed);
            ColumnarBatch batch = out.finish(n);
            sizer.observe(n, windowTokens, allocator.getAllocatedMemory());
            List<InternalRow> rows = new ArrayList<>(n);
            for (Iterator<InternalRow> it = out.rows(batch, outputSchema); it.hasNext(); ) {
                rows.add(toUnsafe.apply(it.next()).copy());
            }
            return rows.iterator();
        }

        /**
         * A text row: the prompt with the tokenizer's special tokens (BOS), then the continuation's tokens when
         * there is one (only those are scored). Returns the error, or null with tokens[i] and scoreFrom[i] set.
         */
        private String tokenizeText(
                VarCharVector prompt, VarCharVector continuation, int i, int[][] tokens, int[] scoreFrom) {
            String p = new String(prompt.get(i), java.nio.charset.StandardCharsets.UTF_8);
            if (p.isEmpty()) {
                return "prompt is empty";
            }
            if (tokenizer == null) {
                return "text input needs a tokenizer and this model folder has none (give token_ids instead)";
            }
            int[] promptIds;
            int[] cont = null;
            try { // a text the tokenizer's rules cannot handle (a regex that runs away on it) fails its row only
                promptIds = tokenizer.encode(p, true);
                if (!continuation.isNull(i)) {
                    cont = tokenizer.encode(
                            new String(continuation.get(i), java.nio.charset.StandardCharsets.UTF_8), false);
                }
            } catch (TokenizerException e) {
                return "cannot tokenize the text: " + e.getMessage();
            }
            int[] all = promptIds;
            int from = 1;
            if (cont != null) {
                if (cont.length == 0) {
                    return "continuation is empty";
                }
                all = java.util.Arrays.copyOf(promptIds, promptIds.length + cont.length);
                System.arraycopy(cont, 0, all, promptIds.length, cont.length);
                from = promptIds.length;
            }
            if (all.length == 0) {
                return "prompt has no tokens";
            }
            String err =
                    RowCheck.tokenized(all, model.vocabSize(), model.config().maxPositionEmbeddings());
            if (err != null) {
                return err;
            }
            tokens[i] = all;
            scoreFrom[i] = Math.max(1, from);
            return null;
        }

        /**
         * Stops a read ahead that is still running (a failed or killed task closes the window mid-stream): interrupts
         * it and waits for it to leave the buffers. False if it has not within a minute.
         */
        private boolean stopReader() {
            Thread t = reader;
            if (t == null || !t.isAlive()) {
                return true;
            }
            t.interrupt();
            try {
                t.join(60_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (t.isAlive()) {
                LOG.warn(
                        "scorch score task {}: the thread reading the next window has not stopped; its buffers are left"
                                + " allocated",
                        label);
                return false;
            }
            return true;
        }

        @Override
        public void close() {
            if (!closed) {
                closed = true;
                long wall = System.nanoTime() - start;
                metrics.partitionNanos().add(wall);
                LOG.info(
                        "scorch score task {}: engine busy {} % of the partition's {} s (time in its score calls over"
                                + " the wall time since the model was ready)",
                        label,
                        String.format(java.util.Locale.ROOT, "%.1f", wall == 0 ? 0.0 : 100.0 * engineNanos / wall),
                        String.format(java.util.Locale.ROOT, "%.3f", wall / 1e9));
                if (!stopReader()) {
                    return; // its buffers stay allocated rather than be freed under a thread still writing them
                }
                out.close();
                for (InputBuffer b : buffers) {
                    b.close();
                }
                allocator.close();
            }
        }
    }
}
