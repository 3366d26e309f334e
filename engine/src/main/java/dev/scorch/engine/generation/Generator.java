package dev.scorch.engine.generation;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.sampling.Sampler;
import dev.scorch.engine.tokenizer.IncrementalDecoder;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * Continuous batching: sequences (request × sample) wait in arrival order; those that fit the limits join the
 * running batch (their prompts prefilled together), every step decodes one token for each running sequence,
 * and finished ones leave so waiting ones can join. A sequence's tokens depend only on its prompt, parameters
 * and seed: the engine is batch-invariant bit for bit and each draw comes from (seed, sample, step).
 *
 * <p>{@link #stream} pulls requests lazily and hands back each request's completions as soon as its last
 * sample finishes, so a Spark partition of any size streams through with bounded memory.
 */
public final class Generator {
    private final DecodingModel model;
    private final Limits limits;
    private final Tokenizer tokenizer; // for text and stop strings; may be null
    private final long cacheBytesPerToken;

    /**
     * What may run at once.
     *
     * @param maxCacheBytes    KV cache bytes of all running sequences together (each reserves prompt + max_new_tokens)
     * @param maxPrefillTokens prompt tokens prefilled in one batch (a longer prompt is prefilled alone)
     * @param maxSequences     sequences decoded in one step
     */
    public record Limits(long maxCacheBytes, int maxPrefillTokens, int maxSequences) {
        public Limits {
            if (maxCacheBytes < 1 || maxPrefillTokens < 1 || maxSequences < 1) {
                throw new IllegalArgumentException("generation limits must be positive, got " + maxCacheBytes
                        + " cache bytes, " + maxPrefillTokens + " prefill tokens, " + maxSequences + " sequences");
            }
        }

        public static Limits ofCacheBytes(long maxCacheBytes) {
            return new Limits(maxCacheBytes, Integer.MAX_VALUE, Integer.MAX_VALUE);
        }
    }

    /** A request and the caller's handle for it (a row id, an index). */
    public record Tagged<T>(T tag, GenerationRequest request) {}

    /** All n completions of one request, in sample order. */
    public record Finished<T>(T tag, GenerationRequest request, List<Completion> completions) {}

    public Generator(DecodingModel model, Limits limits, Tokenizer tokenizer) {
        this.model = model;
        this.limits = limits;
        this.tokenizer = tokenizer;
        this.cacheBytesPerToken = model.cacheBytesPerToken();
    }

    /** On the CPU engine. */
    public Generator(DeepseekV3Model model, CpuOps ops, Limits limits, Tokenizer tokenizer) {
        this(new StageDecodingModel(model.on(ops)), limits, tokenizer);
    }

    public Generator(DeepseekV3Model model, CpuOps ops, long maxCacheBytes, Tokenizer tokenizer) {
        this(model, ops, Limits.ofCacheBytes(maxCacheBytes), tokenizer);
    }

    /** Why this request cannot run here (its cache exceeds the budget, stop strings without a tokenizer), or null. */
    public String check(GenerationRequest req) {
        long bytes = cacheBytesPerToken * req.maxCacheTokens();
        if (bytes > limits.maxCacheBytes()) {
            return "prompt (" + req.prompt().length + " tokens) + max_new_tokens (" + req.maxNewTokens() + ") need "
                    + bytes + " bytes of KV cache, over the budget of " + limits.maxCacheBytes();
        }
        if (req.maxCacheTokens() > model.config().maxPositionEmbeddings()) {
            return "prompt (" + req.prompt().length + " tokens) + max_new_tokens (" + req.maxNewTokens()
                    + ") exceed the model's max_position_embeddings "
                    + model.config().maxPositionEmbeddings();
        }
        if (!req.stopStrings().isEmpty() && tokenizer == null) {
            return "stop strings need a tokenizer and this model has none";
        }
        return null;
    }

    /** Completions per request, n each, in sample order. */
    public List<List<Completion>> generate(List<GenerationRequest> requests) {
        List<Tagged<Integer>> tagged = new ArrayList<>();
        for (int r = 0; r < requests.size(); r++) {
            String problem = check(requests.get(r));
            if (problem != null) {
                throw new IllegalArgumentException("request " + r + ": " + problem);
            }
            tagged.add(new Tagged<>(r, requests.get(r)));
        }
        List<List<Completion>> out = new ArrayList<>(requests.size());
        for (int r = 0; r < requests.size(); r++) {
            out.add(null);
        }
        for (Iterator<Finished<Integer>> it = stream(tagged.iterator()); it.hasNext(); ) {
            Finished<Integer> f = it.next();
            out.set(f.tag(), f.completions());
        }
        return out;
    }

    /**
     * Generates for requests as they come (each must pass {@link #check}); yields requests as they finish. Closing
     * the stream early (a failed task) gives back the KV caches of the sequences still running.
     */
    public <T> Stream<T> stream(Iterator<Tagged<T>> requests) {
        return new Run<>(requests);
    }

    /** Finished requests as they come; {@link #close} frees the caches of unfinished ones. */
    public interface Stream<T> extends Iterator<Finished<T>>, AutoCloseable {
        @Override
        void close();
    }

    /** One request's samples, collected until the last one finishes. */
    private static final class Group<T> {
        final T tag;
        final GenerationRequest req;
        final Completion[] done;
        int remaining;

        Group(T tag, GenerationRequest req) {
            this.tag = tag;
            this.req = req;
            this.done = new Completion[req.n()];
            this.remaining = req.n();
        }
    }

    /** One running or waiting sequence. */
    private final class Seq {
        final Group<?> group;
        final GenerationRequest req;
        final int sample;
        final int[] out;
        final float[] lps;
        final int[][] topIds;
        final float[][] topLps;
        final IncrementalDecoder decoder;
        final StringBuilder text;
        int generated;
        DecodingModel.Cache cache;
        Completion.FinishReason finish;
        String error; // with finish ERROR
        int next = -1; // the token to feed at the next decode step

        Seq(Group<?> group, int sample) {
            this.group = group;
            this.req = group.req;
            this.sample = sample;
            this.out = new int[req.maxNewTokens()];
            this.lps = new float[req.maxNewTokens()];
            this.topIds = req.topLogprobs() > 0 ? new int[req.maxNewTokens()][] : null;
            this.topLps = req.topLogprobs() > 0 ? new float[req.maxNewTokens()][] : null;
            this.decoder = tokenizer == null ? null : new IncrementalDecoder(tokenizer, true);
            this.text = tokenizer == null ? null : new StringBuilder();
        }

        long cacheBytes() {
            return cacheBytesPerToken * req.maxCacheTokens();
        }

        Completion completion() {
            if (text != null && finish != Completion.FinishReason.STOP && finish != Completion.FinishReason.ERROR) {
                text.append(decoder.finish());
            }
            return new Completion(
                    Arrays.copyOf(out, generated),
                    Arrays.copyOf(lps, generated),
                    topIds == null ? null : Arrays.copyOf(topIds, generated),
                    topLps == null ? null : Arrays.copyOf(topLps, generated),
                    text == null ? null : text.toString(),
                    finish,
                    sample,
                    error);
        }
    }

    /** The state of one stream: waiting and running sequences, and requests finished but not yet handed out. */
    private final class Run<T> implements Stream<T> {
        private final Iterator<Tagged<T>> requests;
        private final Deque<Seq> waiting = new ArrayDeque<>();
        private final List<Seq> running = new ArrayList<>();
        private final Deque<Finished<T>> finished = new ArrayDeque<>();
        private long usedCacheBytes;

        Run(Iterator<Tagged<T>> requests) {
            this.requests = requests;
        }

        @Override
        public void close() {
            for (Seq q : running) {
                if (q.cache != null) {
                    q.cache.close();
                    q.cache = null;
                }
            }
            running.clear();
            waiting.clear();
        }

        @Override
        public boolean hasNext() {
            while (finished.isEmpty() && (!waiting.isEmpty() || !running.isEmpty() || requests.hasNext())) {
                step();
            }
            return !finished.isEmpty();
        }

        @Override
        public Finished<T> next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            return finished.poll();
        }

        /** Admits what fits, prefills it, decodes one token for every running sequence, and retires finished ones. */
        private void step() {
            List<Seq> joining = admit();
            if (!joining.isEmpty()) {
                prefill(joining);
                running.addAll(joining);
            }
            List<Seq> stepping = new ArrayList<>(running.size());
            for (Seq q : running) {
                if (q.finish == null) {
                    stepping.add(q);
                }
            }
            if (!stepping.isEmpty()) {
                int[] tokens = new int[stepping.size()];
                DecodingModel.Cache[] caches = new DecodingModel.Cache[stepping.size()];
                for (int i = 0; i < tokens.length; i++) {
                    tokens[i] = stepping.get(i).next;
                    caches[i] = stepping.get(i).cache;
                }
                float[] logits = model.decode(tokens, caches); // [sequences, vocab]
                for (int i = 0; i < tokens.length; i++) {
                    choose(stepping.get(i), logits, i * model.config().vocabSize());
                }
            }
            for (Iterator<Seq> it = running.iterator(); it.hasNext(); ) {
                Seq q = it.next();
                if (q.finish != null) {
                    it.remove();
                    retire(q);
                }
            }
        }

        /** Moves waiting sequences into the batch while their caches, prompt tokens and count fit the limits. */
        private List<Seq> admit() {
            List<Seq> joining = new ArrayList<>();
            long prefillTokens = 0;
            while (true) {
                if (waiting.isEmpty() && requests.hasNext()) {
                    Tagged<T> t = requests.next();
                    Group<T> g = new Group<>(t.tag(), t.request());
                    for (int s = 0; s < g.req.n(); s++) {
                        waiting.add(new Seq(g, s));
                    }
                }
                Seq q = waiting.peek();
                if (q == null
                        || usedCacheBytes + q.cacheBytes() > limits.maxCacheBytes()
                        || running.size() + joining.size() >= limits.maxSequences()
                        || (!joining.isEmpty() && prefillTokens + q.req.prompt().length > limits.maxPrefillTokens())) {
                    return joining;
                }
                waiting.poll();
                q.cache = model.newCache(q.req.maxCacheTokens());
                usedCacheBytes += q.cacheBytes();
                prefillTokens += q.req.prompt().length;
                joining.add(q);
            }
        }

        private void retire(Seq q) {
            usedCacheBytes -= q.cacheBytes();
            q.cache.close();
            q.cache = null;
            @SuppressWarnings("unchecked")
            Group<T> g = (Group<T>) q.group;
            g.done[q.sample] = q.completion();
            if (--g.remaining == 0) {
                finished.add(new Finished<>(g.tag, g.req, List.of(g.done)));
            }
        }
    }

    /**
     * Prefills the joining prompts in one packed batch and chooses each one's first token. Samples of one request
     * joining together share its prompt's prefill: the others copy its cache and its logits.
     */
    private void prefill(List<Seq> joining) {
        List<Seq> leaders = new ArrayList<>();
        int[] leaderOf = new int[joining.size()];
        for (int i = 0; i < joining.size(); i++) {
            Seq q = joining.get(i);
            leaderOf[i] = leaders.size();
            if (!leaders.isEmpty() && leaders.get(leaders.size() - 1).group == q.group) {
                leaderOf[i] = leaders.size() - 1; // samples of a request are admitted one after another
            } else {
                leaders.add(q);
            }
        }
        List<int[]> prompts = new ArrayList<>();
        List<DecodingModel.Cache> caches = new ArrayList<>();
        for (Seq q : leaders) {
            prompts.add(q.req.prompt());
            caches.add(q.cache);
        }
        float[] logits = model.prefill(prompts, caches); // [prompts, vocab]
        int vocab = model.config().vocabSize();
        for (int i = 0; i < joining.size(); i++) {
            Seq q = joining.get(i);
            Seq leader = leaders.get(leaderOf[i]);
            if (q != leader) {
                q.cache.copyFrom(leader.cache);
            }
            choose(q, logits, leaderOf[i] * vocab);
        }
    }

    /**
     * Samples sequence q's next token from logits[off ..], records it, and decides whether q is done. Logits with a NaN or
     * an infinity (the checkpoint's weights or config values) end q with an error: any token drawn from them is garbage.
     */
    private void choose(Seq q, float[] logits, int off) {
        int vocab = model.config().vocabSize();
        int step = q.generated;
        double logZ = LogSoftmax.logSumExp(logits, off, vocab); // NaN or infinite when any logit is NaN or +Inf
        if (!Double.isFinite(logZ)) {
            q.finish = Completion.FinishReason.ERROR;
            q.error = "non-finite logits at generated token " + step
                    + ": the checkpoint's weights or config produce NaN/Inf";
            return;
        }
        int t = Sampler.sample(logits, off, vocab, q.req.params(), q.req.prompt(), q.out, step, q.sample, step);
        if (q.req.stopTokenIds().contains(t)) {
            q.finish = Completion.FinishReason.EOS;
            return;
        }
        q.out[step] = t;
        q.lps[step] = (float) (logits[off + t] - logZ);
        if (q.topIds != null) {
            int[] ids = LogSoftmax.topK(logits, off, vocab, q.req.topLogprobs());
            float[] lp = new float[ids.length];
            for (int k = 0; k < ids.length; k++) {
                lp[k] = (float) (logits[off + ids[k]] - logZ);
            }
            q.topIds[step] = ids;
            q.topLps[step] = lp;
        }
        q.generated++;
        q.next = t;
        if (q.text != null && appendText(q, t)) {
            q.finish = Completion.FinishReason.STOP;
        } else if (q.generated == q.req.maxNewTokens()) {
            q.finish = Completion.FinishReason.LENGTH;
        }
    }

    /**
     * Appends token t's text; when the text now holds a stop string, cuts the text before the earliest one and
     * returns true. Only the new text and the few characters before it that a stop string could span are searched.
     */
    private static boolean appendText(Seq q, int t) {
        int before = q.text.length();
        q.text.append(q.decoder.feed(t));
        int cut = -1;
        for (String stop : q.req.stopStrings()) {
            int from = Math.max(0, before - stop.length() + 1);
            int at = q.text.indexOf(stop, from);
            if (at >= 0 && (cut < 0 || at < cut)) {
                cut = at;
            }
        }
        if (cut < 0) {
            return false;
        }
        q.text.setLength(cut);
        return true;
    }
}
