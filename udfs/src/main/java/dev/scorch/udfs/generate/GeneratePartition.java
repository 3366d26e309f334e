package dev.scorch.udfs.generate;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.DecodingModel;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.generation.StageDecodingModel;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.TokenizerException;
import dev.scorch.udfs.backend.TaskGpus;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.LoadedModel;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.progress.LocalProgress;
import dev.scorch.udfs.score.RowCheck;
import dev.scorch.udfs.score.ScorePartition;
import dev.scorch.udfs.score.ScoreSchema;
import dev.scorch.udfs.score.TestOnlyHold;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The generate job's partition engine. Rows stream through the engine's continuous batching
 * ({@link Generator#stream}): a row is read when the batch has room for it, and its output rows leave as soon as
 * its last sample finishes, so a partition of any size runs in bounded memory. A row that cannot run (no
 * prompt, bad token ids, too long, bad sampling values) becomes error rows at once. Every input row yields
 * exactly n output rows (one per sample), joinable by id.
 */
public final class GeneratePartition implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private static final Logger LOG = LoggerFactory.getLogger(GeneratePartition.class);

    /** Error rows waiting to be emitted before more input is read (bounds the buffer on runs of bad rows). */
    private static final int MAX_PENDING_ERRORS = 256;

    private final ModelSource source;
    private final GenerateOptions options;
    private final StructType inputSchema;
    private final StructType outputSchema;
    private final String modelLabel;
    private final JobMetrics metrics;

    public GeneratePartition(
            ModelSource source,
            GenerateOptions options,
            StructType inputSchema,
            StructType outputSchema,
            String modelLabel,
            JobMetrics metrics) {
        this.source = source;
        this.options = options;
        this.inputSchema = inputSchema;
        this.outputSchema = outputSchema;
        this.modelLabel = modelLabel;
        this.metrics = metrics;
    }

    /** What travels with a request through the engine: the row's id and its prompt length. */
    private record RowTag(Object id, UTF8String source, int promptTokens) {}

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
        Tokenizer tokenizer = loaded.tokenizer().orElse(null);
        BackendChoice choice = BackendChoice.choose(options.backend(), gpuAddresses, cuda);
        DecodingModel engine;
        String on;
        if (choice.cuda()) {
            // The KV caches live on the GPUs (each stage's layers' on its own), within the job's per-task cache
            // budget, beside the executor's shared weights.
            List<Integer> gpus = TaskGpus.ordinals(gpuAddresses, choice.gpuOrdinal());
            Scorer gpu = ExecutorModelCache.gpuScorer(source, gpus, options.gpuPrecision(), devices);
            engine = new StageDecodingModel(gpu.stages());
            on = ScorePartition.onGpus(gpus, gpu.stages(), options.gpuPrecision());
        } else {
            engine = new StageDecodingModel(
                    loaded.model().on(ExecutorModelCache.ops(options.threads(), options.cpuPrecision())));
            on = "cpu, " + options.threads() + " thread(s)";
        }
        LOG.info(
                "scorch generate task {}: backend {} ({})",
                tc == null
                        ? "(no task)"
                        : "stage " + tc.stageId() + " partition " + tc.partitionId() + " TID " + tc.taskAttemptId(),
                on,
                choice.reason());
        Generator generator = new Generator(engine, options.limits().engine(), tokenizer);
        Rows rows = new Rows(loaded.model(), tokenizer, generator);
        Deque<InternalRow> ready = new ArrayDeque<>();

        // Good rows become requests; bad ones become error rows on the spot.
        Iterator<Generator.Tagged<RowTag>> requests = new Iterator<>() {
            private Generator.Tagged<RowTag> pending;

            @Override
            public boolean hasNext() {
                // Says false while too many error rows wait: the engine then only decodes, and asks again later.
                while (pending == null && ready.size() < MAX_PENDING_ERRORS && input.hasNext()) {
                    pending = rows.request(input.next(), ready);
                }
                return pending != null;
            }

            @Override
            public Generator.Tagged<RowTag> next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                Generator.Tagged<RowTag> t = pending;
                pending = null;
                return t;
            }
        };
        Generator.Stream<RowTag> finished = generator.stream(requests);
        if (tc != null) {
            // A failed or cancelled task gives its running sequences' KV caches back (device memory on a GPU).
            tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) ctx -> finished.close());
        }
        return new Iterator<>() {
            @Override
            public boolean hasNext() {
                // When the engine has nothing more, the input is used up (reading stops early only while errors wait).
                while (ready.isEmpty() && finished.hasNext()) {
                    rows.emit(finished.next(), ready);
                }
                return !ready.isEmpty();
            }

            @Override
            public InternalRow next() {
                if (!hasNext()) {
                    throw new NoSuchElementException();
                }
                return ready.poll();
            }
        };
    }

    /** Turns input rows into requests and results into output rows. */
    private final class Rows {
        private final DeepseekV3Model model;
        private final Tokenizer tokenizer;
        private final Generator generator;
        private final UnsafeProjection toUnsafe = UnsafeProjection.create(outputSchema);
        private final UTF8String label = UTF8String.fromString(modelLabel);
        private final int id = inputSchema.fieldIndex(ScoreSchema.ID);
        private final DataType idType = inputSchema.apply(ScoreSchema.ID).dataType();
        private final int tokenIds = inputSchema.fieldIndex(ScoreSchema.TOKEN_IDS);
        private final int prompt = inputSchema.fieldIndex(ScoreSchema.PROMPT);
        private final int messages = inputSchema.fieldIndex(GenerateSchema.MESSAGES);
        private final int where = inputSchema.fieldIndex(ScoreSchema.SOURCE);
        private final int inputError = inputSchema.fieldIndex(ScoreSchema.INPUT_ERROR);
        private final int[] param = new int[RowParam.values().length];

        Rows(DeepseekV3Model model, Tokenizer tokenizer, Generator generator) {
            this.model = model;
            this.tokenizer = tokenizer;
            this.generator = generator;
            for (RowParam p : RowParam.values()) {
                param[p.ordinal()] = inputSchema.fieldIndex(p.column);
            }
        }

        /** The row's request, or null after adding its error rows to out. */
        Generator.Tagged<RowTag> request(InternalRow row, Deque<InternalRow> out) {
            // Copies: the input row's buffer is reused.
            Object rowId = row.isNullAt(id) ? null : InternalRow.copyValue(row.get(id, idType));
            UTF8String source =
                    row.isNullAt(where) ? null : row.getUTF8String(where).copy();
            if (!row.isNullAt(inputError)) {
                String at = source == null ? "" : " (input row " + source + ")";
                failed(rowId, source, null, row.getUTF8String(inputError) + at, out);
                return null;
            }
            Object ids = promptIds(row);
            if (ids instanceof String err) {
                failed(rowId, source, null, err, out);
                return null;
            }
            int[] promptIds = (int[]) ids;
            GenerationRequest req;
            try {
                req = new GenerationRequest(
                        promptIds,
                        sampling(row),
                        intParam(row, RowParam.MAX_NEW_TOKENS, options.maxNewTokens()),
                        new HashSet<>(options.stopTokenIds()),
                        stopStrings(row),
                        options.n(),
                        options.topLogprobs());
            } catch (IllegalArgumentException e) {
                failed(rowId, source, promptIds.length, e.getMessage(), out);
                return null;
            }
            String problem = generator.check(req);
            if (problem != null) {
                failed(rowId, source, promptIds.length, problem, out);
                return null;
            }
            return new Generator.Tagged<>(new RowTag(rowId, source, promptIds.length), req);
        }

        /** token_ids, else the chat messages through the chat template, else the prompt text: an int[] or the problem. */
        private Object promptIds(InternalRow row) {
            int maxPositions = model.config().maxPositionEmbeddings();
            if (!row.isNullAt(tokenIds)) {
                return RowCheck.tokens(row.getArray(tokenIds), model.vocabSize(), maxPositions);
            }
            if (!row.isNullAt(messages) || !row.isNullAt(prompt)) {
                if (tokenizer == null) {
                    return "text input needs a tokenizer and this model folder has none (give token_ids instead)";
                }
                int[] encoded;
                if (!row.isNullAt(messages)) {
                    ChatTemplate template = tokenizer.chatTemplate().orElse(null);
                    if (template == null) {
                        return "messages need a chat template and this tokenizer has none";
                    }
                    ArrayData list = row.getArray(messages);
                    if (list.numElements() == 0) {
                        return "messages is empty";
                    }
                    List<ChatTemplate.Message> chat = new ArrayList<>(list.numElements());
                    for (int i = 0; i < list.numElements(); i++) {
                        InternalRow m = list.getStruct(i, 2);
                        if (m == null || m.isNullAt(0)) {
                            return "message " + i + " has no role";
                        }
                        chat.add(new ChatTemplate.Message(
                                m.getUTF8String(0).toString(),
                                m.isNullAt(1) ? "" : m.getUTF8String(1).toString()));
                    }
                    try {
                        encoded = tokenizer.encode(template.render(chat, true), false);
                    } catch (RuntimeException e) {
                        return "chat template failed: " + e.getMessage();
                    }
                } else {
                    String text = row.getUTF8String(prompt).toString();
                    if (text.isEmpty()) {
                        return "prompt is empty";
                    }
                    try { // a text the tokenizer's rules cannot handle (a regex that runs away on it) fails its row
                        // only
                        encoded = tokenizer.encode(text, true);
                    } catch (TokenizerException e) {
                        return "cannot tokenize the prompt: " + e.getMessage();
                    }
                }
                if (encoded.length == 0) {
                    return "prompt has no tokens";
                }
                String err = RowCheck.tokenized(encoded, model.vocabSize(), maxPositions);
                return err != null ? err : encoded;
            }
            return "no prompt: token_ids, prompt and messages are all null";
        }

        /** The job's sampling settings with the row's own values where it has them. */
        private SamplingParams sampling(InternalRow row) {
            SamplingParams d = options.sampling();
            return new SamplingParams(
                    doubleParam(row, RowParam.TEMPERATURE, d.temperature()),
                    intParam(row, RowParam.TOP_K, d.topK()),
                    doubleParam(row, RowParam.TOP_P, d.topP()),
                    doubleParam(row, RowParam.MIN_P, d.minP()),
                    doubleParam(row, RowParam.REPETITION_PENALTY, d.repetitionPenalty()),
                    doubleParam(row, RowParam.PRESENCE_PENALTY, d.presencePenalty()),
                    doubleParam(row, RowParam.FREQUENCY_PENALTY, d.frequencyPenalty()),
                    row.isNullAt(param[RowParam.SEED.ordinal()])
                            ? d.seed()
                            : row.getLong(param[RowParam.SEED.ordinal()]));
        }

        private List<String> stopStrings(InternalRow row) {
            int i = param[RowParam.STOP.ordinal()];
            if (row.isNullAt(i)) {
                return options.stopStrings();
            }
            ArrayData a = row.getArray(i);
            List<String> out = new ArrayList<>(a.numElements());
            for (int k = 0; k < a.numElements(); k++) {
                if (!a.isNullAt(k)) {
                    out.add(a.getUTF8String(k).toString());
                }
            }
            return out;
        }

        private int intParam(InternalRow row, RowParam p, int dflt) {
            int i = param[p.ordinal()];
            return row.isNullAt(i) ? dflt : row.getInt(i);
        }

        private double doubleParam(InternalRow row, RowParam p, double dflt) {
            int i = param[p.ordinal()];
            return row.isNullAt(i) ? dflt : row.getDouble(i);
        }

        /** n error rows (one per sample) for a row that cannot run. */
        private void failed(
                Object rowId, UTF8String source, Integer promptTokens, String error, Deque<InternalRow> out) {
            for (int s = 0; s < options.n(); s++) {
                out.add(row(rowId, source, s, null, null, "error", promptTokens, null, null, null, error));
            }
            count(1, 0, 1);
        }

        /** A finished request's n rows: a sample that ended in an error (non-finite logits) is an error row. */
        void emit(Generator.Finished<RowTag> f, Deque<InternalRow> out) {
            long tokens = 0;
            long errors = 0;
            for (Completion c : f.completions()) {
                if (c.finishReason() == Completion.FinishReason.ERROR) {
                    out.add(row(
                            f.tag().id(),
                            f.tag().source(),
                            c.sample(),
                            null,
                            null,
                            "error",
                            f.tag().promptTokens(),
                            null,
                            null,
                            null,
                            c.error()));
                    errors++;
                    continue;
                }
                int[] ids = c.tokenIds();
                tokens += ids.length;
                out.add(row(
                        f.tag().id(),
                        f.tag().source(),
                        c.sample(),
                        c.text() == null ? null : UTF8String.fromString(c.text()),
                        UnsafeArrayData.fromPrimitiveArray(ids),
                        c.finishReason().name().toLowerCase(java.util.Locale.ROOT),
                        f.tag().promptTokens(),
                        ids.length,
                        options.logprobs() ? UnsafeArrayData.fromPrimitiveArray(c.logprobs()) : null,
                        topLogprobs(c),
                        null));
            }
            count(1, tokens, errors > 0 ? 1 : 0);
        }

        private ArrayData topLogprobs(Completion c) {
            if (options.topLogprobs() == 0) {
                return null;
            }
            Object[] steps = new Object[c.tokenIds().length];
            for (int t = 0; t < steps.length; t++) {
                Object[] entries = new Object[c.topIds()[t].length];
                for (int k = 0; k < entries.length; k++) {
                    entries[k] = new GenericInternalRow(new Object[] {c.topIds()[t][k], c.topLogprobs()[t][k]});
                }
                steps[t] = new GenericArrayData(entries);
            }
            return new GenericArrayData(steps);
        }

        private UnsafeRow row(
                Object rowId,
                UTF8String source,
                int sample,
                UTF8String completion,
                ArrayData ids,
                String finish,
                Integer promptTokens,
                Integer completionTokens,
                ArrayData logprobs,
                ArrayData top,
                String error) {
            List<Object> v = new ArrayList<>(outputSchema.size());
            v.add(rowId);
            v.add(sample);
            v.add(completion);
            v.add(ids);
            v.add(UTF8String.fromString(finish));
            v.add(promptTokens);
            v.add(completionTokens);
            if (options.logprobs()) {
                v.add(logprobs);
            }
            if (options.topLogprobs() > 0) {
                v.add(top);
            }
            v.add(error == null ? null : UTF8String.fromString(error));
            v.add(label);
            v.add(source);
            return toUnsafe.apply(new GenericInternalRow(v.toArray())).copy();
        }

        private void count(long rowsDone, long tokens, long errors) {
            metrics.rows().add(rowsDone);
            metrics.tokens().add(tokens);
            metrics.errors().add(errors);
            LocalProgress.add(rowsDone, tokens, errors);
        }
    }
}
