package dev.scorch.jobs.cli;

import dev.scorch.jobs.generate.GenerateJob;
import dev.scorch.jobs.generate.GenerateSpec;
import dev.scorch.jobs.generate.GenerateSummary;
import dev.scorch.udfs.api.Bounds;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import org.apache.spark.sql.SparkSession;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

@Command(
        name = "generate",
        mixinStandardHelpOptions = true,
        description = {
            "Generates completions for a dataset of prompts on Spark, with continuous batching over the MLA latent",
            "KV cache in every task. Input: Parquet, JSONL or CSV rows with an id and token_ids, a prompt text, or",
            "chat messages [{role, content}, ...] (rendered with the tokenizer's chat template); optional per-row",
            "columns max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, presence_penalty,",
            "frequency_penalty, seed, stop override the job's settings. Output per input row and sample: completion,",
            "completion_token_ids, finish_reason (stop | length | eos | error), token counts, optional log-probs,",
            "error. A row's completion depends only on its prompt, settings and seed, never on batch or partition."
        },
        footer = {
            "",
            "Sampling settings not given come from the checkpoint's generation_config.json when its do_sample is",
            "true; otherwise decoding is greedy. EOS ids from generation_config.json end a completion (--ignore-eos).",
            "",
            "Examples:",
            "  bin/scorch generate --model demo --input conf/examples/prompts.jsonl --output out/completions --output-format jsonl",
            "  bin/scorch generate --model /data/Kimi-K2 --input s3a://bucket/chats.parquet --output s3a://bucket/completions \\",
            "      --master spark://head:7077 --conf conf/standalone.conf --temperature 0.7 --top-p 0.95 --seed 7 --n 4 --max-new-tokens 512",
            "  bin/scorch generate --model demo --input in.jsonl --output out --stop '\\n\\n' --logprobs --top-logprobs 5 --resume",
            "",
            "On a cluster: spark-submit --class dev.scorch.jobs.generate.GenerateJob jobs/target/scorch-jobs.jar <same options>"
        })
public final class GenerateCommand implements Callable<Integer> {
    @Mixin
    JobOptions job;

    @Option(
            names = "--messages-column",
            defaultValue = "messages",
            description = "Chat messages column. Default: ${DEFAULT-VALUE}.")
    String messagesColumn;

    @Option(
            names = "--max-new-tokens",
            description = "Most tokens per completion. Default: generation_config.json's, else 256.")
    Integer maxNewTokens;

    @Option(names = "--temperature", description = "0 = greedy (ties to the lowest id). Default: see below.")
    Double temperature;

    @Option(names = "--top-k", description = "Sample among the k most likely (0 = all).")
    Integer topK;

    @Option(
            names = "--top-p",
            description = "Nucleus sampling: the smallest most-likely set reaching this probability (1 = all).")
    Double topP;

    @Option(
            names = "--min-p",
            description = "Drop tokens less likely than min_p × the most likely one's probability. Default: 0.")
    Double minP;

    @Option(
            names = "--repetition-penalty",
            description = "Hugging Face style, over prompt and output (1 = none). Default: 1.")
    Double repetitionPenalty;

    @Option(names = "--presence-penalty", description = "OpenAI style, over the output. Default: 0.")
    Double presencePenalty;

    @Option(names = "--frequency-penalty", description = "OpenAI style, over the output. Default: 0.")
    Double frequencyPenalty;

    @Option(names = "--seed", description = "Seed of rows without a seed column. Default: 0.")
    Long seed;

    @Option(names = "--stop", description = "A stop string (repeatable): the completion's text ends before it.")
    List<String> stop = new ArrayList<>();

    @Option(names = "--stop-token-id", description = "An extra stop token id (repeatable), like EOS.")
    List<Integer> stopTokenIds = new ArrayList<>();

    @Option(names = "--ignore-eos", description = "Do not stop at generation_config.json's EOS ids.")
    boolean ignoreEos;

    @Option(
            names = "--n",
            description = "Completions per prompt (sample index 0 .. n-1, each its own random stream). Default: 1.")
    Integer n;

    @Option(names = "--logprobs", description = "Write token_logprobs: log p of each generated token.")
    boolean logprobs;

    @Option(
            names = "--top-logprobs",
            description = "Write top_logprobs: this many alternatives per generated token. Default: 0.")
    Integer topLogprobs;

    @Option(
            names = "--max-cache-mb",
            description = "KV cache memory per task, in MiB (each running sequence reserves prompt +"
                    + " max_new_tokens). Default: 2048.")
    Integer maxCacheMb;

    @Option(names = "--max-batch-tokens", description = "Prompt tokens prefilled together. Default: 4096.")
    Integer maxBatchTokens;

    @Option(names = "--max-batch-seqs", description = "Sequences decoded together. Default: 32.")
    Integer maxBatchSeqs;

    @Override
    public Integer call() throws Exception {
        // Every numeric option is checked before Spark starts: a bad one fails at once (exit 2) naming it.
        job.check();
        Integer maxNew = optionalInt("max-new-tokens", maxNewTokens, Bounds.MAX_NEW_TOKENS);
        Double temp = job.decimal("temperature", temperature, null, Bounds.TEMPERATURE);
        Integer k = optionalInt("top-k", topK, Bounds.SAMPLING_TOP_K);
        Double p = job.decimal("top-p", topP, null, Bounds.TOP_P);
        Double min = job.decimal("min-p", minP, 0.0, Bounds.MIN_P);
        Double repetition = job.decimal("repetition-penalty", repetitionPenalty, 1.0, Bounds.REPETITION_PENALTY);
        Double presence = job.decimal("presence-penalty", presencePenalty, 0.0, Bounds.OPENAI_PENALTY);
        Double frequency = job.decimal("frequency-penalty", frequencyPenalty, 0.0, Bounds.OPENAI_PENALTY);
        long rowSeed = seed != null ? seed : seedFromConfig();
        for (Integer id : stopTokenIds) {
            Bounds.TOKEN_ID.check("--stop-token-id", id);
        }
        int samples = job.bounded("n", n, 1, Bounds.SAMPLES);
        int topLp = job.bounded("top-logprobs", topLogprobs, 0, Bounds.TOP_LOGPROBS);
        long cacheBytes = (long) job.bounded("max-cache-mb", maxCacheMb, 2048, Bounds.MEMORY_MB) << 20;
        int batchTokens = job.bounded("max-batch-tokens", maxBatchTokens, 4096, Bounds.BATCH_TOKENS);
        int batchSeqs = job.bounded("max-batch-seqs", maxBatchSeqs, 32, Bounds.BATCH_SEQUENCES);
        SparkSession spark = job.session("scorch generate");
        try {
            GenerateSpec spec = new GenerateSpec(
                    job.modelLocation(),
                    job.input,
                    job.inputFormat,
                    job.output,
                    job.outputFormat(),
                    job.partitions(spark),
                    job.idColumn,
                    job.tokenIdsColumn,
                    job.textColumn,
                    messagesColumn,
                    job.weights(spark),
                    job.threads(spark),
                    job.slices(),
                    job.write(),
                    maxNew,
                    temp,
                    k,
                    p,
                    min,
                    repetition,
                    presence,
                    frequency,
                    rowSeed,
                    stop,
                    stopTokenIds,
                    ignoreEos,
                    samples,
                    logprobs,
                    topLp,
                    cacheBytes,
                    batchTokens,
                    batchSeqs,
                    job.backend(),
                    job.gpuPrecision(),
                    job.cpuPrecision());
            GenerateSummary s = GenerateJob.run(spark, spec);
            System.out.println(s.line());
            return 0;
        } finally {
            job.stop(spark);
        }
    }

    /**
     * An integer given, else the job config's, else null (generation_config.json's then), within bound.
     */
    private Integer optionalInt(String name, Integer given, Bounds.Ints bound) {
        Long v = job.configured(name, given);
        return v == null ? null : bound.check("--" + name, v);
    }

    /** The config's scorch.seed, else 0: any 64-bit integer. */
    private long seedFromConfig() {
        String v = job.config().option("seed", "0");
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(
                    "--seed (scorch.seed in --conf) " + v + ": expected a 64-bit integer", e);
        }
    }
}
