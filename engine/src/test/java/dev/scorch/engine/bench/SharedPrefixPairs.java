package dev.scorch.engine.bench;

import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.TokenBudgetBatcher;
import dev.scorch.engine.scoring.BatchScorer;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.PrefixSharingScorer;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * A 5-shot MMLU-shaped task scored plainly ({@link Scorer}, batches by length as the score job cuts them) and with
 * shared prefixes ({@link PrefixSharingScorer}, batches in token order), the two taking turns round by round; prints
 * each round, the medians, the speed-up (median of the rounds' ratios) and the largest log-prob difference, then one
 * JSON line. The task as lm-eval's mmlu builds it with first_n shots: one prompt of a description and five solved
 * questions shared by every document, then the document's question and four options ending in "Answer:", scored
 * against the four one-token choices " A" .. " D". Token counts are MMLU's typical ones; the tokens are random.
 *
 * <pre>
 *   dev/jmh --main dev.scorch.engine.bench.SharedPrefixPairs MODEL [THREADS] [DOCS] [ROUNDS] [MAX_BATCH_TOKENS]
 * </pre>
 */
public final class SharedPrefixPairs {
    /** Tokens of the description, of a solved example (question, options, answer) and of a document's question. */
    static final int DESCRIPTION = 18;

    static final int SHOT_MIN = 70;
    static final int SHOT_MAX = 140;
    static final int QUESTION_MIN = 50;
    static final int QUESTION_MAX = 130;
    static final int SHOTS = 5;

    private SharedPrefixPairs() {}

    public static void main(String[] args) {
        Path model = Path.of(args[0]);
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        int docs = args.length > 2 ? Integer.parseInt(args[2]) : 24;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 5;
        int budget = args.length > 4 ? Integer.parseInt(args[4]) : 4096;
        DeepseekV3Model m = DeepseekV3Model.load(model);
        List<ScoreRequest> reqs = mmluShaped(m.vocabSize(), docs, 1);
        long tokens = 0;
        for (ScoreRequest r : reqs) {
            tokens += r.tokens().length;
        }
        System.out.printf(
                Locale.ROOT,
                "%s: a %d-token prompt, %d documents x 4 choices, %d requests, %d tokens (mean %.0f); %d threads, batches"
                        + " of %d tokens; %s%n",
                model.getFileName(),
                reqs.get(0).sharedPrefix(),
                docs,
                reqs.size(),
                tokens,
                (double) tokens / reqs.size(),
                threads,
                budget,
                KernelSelection.current().describe());
        try (CpuOps ops = new CpuOps(threads)) {
            List<List<ScoreRequest>> plainBatches = TokenBudgetBatcher.batches(reqs, r -> r.tokens().length, budget);
            List<List<ScoreRequest>> sharedBatches =
                    TokenBudgetBatcher.bySharedPrefix(reqs, ScoreRequest::tokens, budget);
            double[] plain = new double[rounds];
            double[] shared = new double[rounds];
            double[] ratio = new double[rounds];
            double worst = 0;
            int choiceAgreement = 0;
            for (int r = -1; r < rounds; r++) { // round -1 warms the JIT
                long t0 = System.nanoTime();
                List<float[]> a = run(new Scorer(m.on(ops)), plainBatches);
                long t1 = System.nanoTime();
                List<float[]> b = run(new PrefixSharingScorer(m, ops), sharedBatches); // a task's blocks, kept
                long t2 = System.nanoTime();
                if (r < 0) {
                    worst = largestDifference(plainBatches, a, sharedBatches, b);
                    choiceAgreement = sameChoices(plainBatches, a, sharedBatches, b, docs);
                    continue;
                }
                plain[r] = (t1 - t0) / 1e9;
                shared[r] = (t2 - t1) / 1e9;
                ratio[r] = plain[r] / shared[r];
                System.out.printf(
                        Locale.ROOT,
                        "round %d: plain %.2f s, shared %.2f s, x%.2f%n",
                        r + 1,
                        plain[r],
                        shared[r],
                        ratio[r]);
            }
            System.out.printf(
                    Locale.ROOT,
                    "median: plain %.2f s (%.0f tokens/s), shared %.2f s; speed-up x%.2f (median of the rounds' ratios);"
                            + " largest |log-prob difference| %.2e; documents whose argmax choice agrees %d/%d%n",
                    median(plain),
                    tokens / median(plain),
                    median(shared),
                    median(ratio),
                    worst,
                    choiceAgreement,
                    docs);
            System.out.printf(
                    Locale.ROOT,
                    "{\"docs\":%d,\"requests\":%d,\"tokens\":%d,\"threads\":%d,\"plain_s\":%.4f,\"shared_s\":%.4f,"
                            + "\"speedup\":%.3f,\"max_abs_diff\":%.3e,\"choices_agree\":%d}%n",
                    docs,
                    reqs.size(),
                    tokens,
                    threads,
                    median(plain),
                    median(shared),
                    median(ratio),
                    worst,
                    choiceAgreement);
        }
    }

    /** The requests of docs MMLU-shaped documents, in document order (a document's four choices together). */
    public static List<ScoreRequest> mmluShaped(int vocab, int docs, long seed) {
        Random rnd = new Random(seed);
        int[] prompt = random(rnd, vocab, DESCRIPTION);
        for (int s = 0; s < SHOTS; s++) {
            prompt = concat(prompt, random(rnd, vocab, SHOT_MIN + rnd.nextInt(SHOT_MAX - SHOT_MIN + 1)));
        }
        int[] choices = random(rnd, vocab, 4); // " A" .. " D"
        List<ScoreRequest> out = new ArrayList<>();
        for (int d = 0; d < docs; d++) {
            int[] context =
                    concat(prompt, random(rnd, vocab, QUESTION_MIN + rnd.nextInt(QUESTION_MAX - QUESTION_MIN + 1)));
            for (int c = 0; c < 4; c++) {
                ScoreRequest r = ScoreRequest.continuation(context, new int[] {choices[c]}, 0, LogitsMode.NONE);
                out.add(new ScoreRequest(r.tokens(), r.scoreFrom(), 0, LogitsMode.NONE, prompt.length));
            }
        }
        return out;
    }

    private static List<float[]> run(BatchScorer scorer, List<List<ScoreRequest>> batches) {
        List<float[]> out = new ArrayList<>();
        BatchScores scores = new BatchScores();
        for (List<ScoreRequest> batch : batches) {
            scorer.score(batch, scores);
            for (int s = 0; s < batch.size(); s++) {
                int n = scores.length(s);
                out.add(Arrays.copyOfRange(scores.tokenLogprobs(), scores.tokenStart(s), scores.tokenStart(s) + n));
            }
        }
        return out;
    }

    /** Each request's log-probs, by request identity, from batches in any order. */
    private static java.util.IdentityHashMap<ScoreRequest, float[]> byRequest(
            List<List<ScoreRequest>> batches, List<float[]> lps) {
        java.util.IdentityHashMap<ScoreRequest, float[]> out = new java.util.IdentityHashMap<>();
        int i = 0;
        for (List<ScoreRequest> batch : batches) {
            for (ScoreRequest r : batch) {
                out.put(r, lps.get(i++));
            }
        }
        return out;
    }

    private static double largestDifference(
            List<List<ScoreRequest>> ba, List<float[]> a, List<List<ScoreRequest>> bb, List<float[]> b) {
        var x = byRequest(ba, a);
        var y = byRequest(bb, b);
        double worst = 0;
        for (var e : x.entrySet()) {
            float[] p = e.getValue();
            float[] q = y.get(e.getKey());
            for (int k = e.getKey().scoreFrom(); k < p.length; k++) {
                worst = Math.max(worst, Math.abs(p[k] - q[k]));
            }
        }
        return worst;
    }

    /** Documents whose highest-scoring choice is the same both ways (lm-eval's acc would agree). */
    private static int sameChoices(
            List<List<ScoreRequest>> ba, List<float[]> a, List<List<ScoreRequest>> bb, List<float[]> b, int docs) {
        var x = byRequest(ba, a);
        var y = byRequest(bb, b);
        List<ScoreRequest> all = new ArrayList<>();
        for (List<ScoreRequest> batch : ba) {
            all.addAll(batch);
        }
        all.sort((p, q) -> Arrays.compare(p.tokens(), q.tokens())); // a document's four requests are neighbours
        int agree = 0;
        for (int d = 0; d < all.size(); d += 4) {
            int bestX = 0;
            int bestY = 0;
            for (int c = 1; c < 4; c++) {
                ScoreRequest r = all.get(d + c);
                int k = r.tokens().length - 1;
                if (x.get(r)[k] > x.get(all.get(d + bestX))[k]) {
                    bestX = c;
                }
                if (y.get(r)[k] > y.get(all.get(d + bestY))[k]) {
                    bestY = c;
                }
            }
            agree += bestX == bestY ? 1 : 0;
        }
        return agree;
    }

    private static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    /** n random token ids in [1, vocab). */
    public static int[] random(Random r, int vocab, int n) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = 1 + r.nextInt(vocab - 1);
        }
        return t;
    }

    public static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
