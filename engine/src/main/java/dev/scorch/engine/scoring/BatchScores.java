package dev.scorch.engine.scoring;

import dev.scorch.engine.kernels.LogSoftmax;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The scores of one batch, filled position by position from logits rows on whichever backend computed them, in
 * flat arrays kept from batch to batch: a caller that keeps one and reads each batch before the next allocates
 * nothing per token. Arrays indexed by token hold sequence s's position k at {@link #tokenStart}(s) + k, with the
 * meaning {@link SequenceScore} gives them.
 */
public final class BatchScores {
    private int vocab;
    private int sequences;
    private ScoreRequest[] requests = new ScoreRequest[0];
    // Per sequence: [B + 1] offsets, [B] the rest.
    private int[] tokenStart = new int[1];
    private int[] topStart = new int[1];
    private int[] logitsStart = new int[1];
    private int[] topK = new int[0];
    private double[] sum = new double[0];
    private int[] scored = new int[0];
    // Per token.
    private float[] tokenLogprobs = new float[0]; // [T], NaN where not scored
    private int[] argmax = new int[0]; // [T], -1 where no logits were computed
    private int[] topIds = new int[0]; // [Σ n·top_k]: position k of sequence s at topStart[s] + k·topK[s]
    private float[] topLogprobs = new float[0];
    private float[] logits = new float[0]; // [Σ rows, vocab]: LAST keeps 1 row, ALL keeps n

    /** Sizes these scores for requests (growing the arrays only when they are too small) and clears them. */
    public void reset(List<ScoreRequest> requests, int vocab) {
        this.vocab = vocab;
        int b = requests.size();
        sequences = b;
        if (this.requests.length < b) {
            this.requests = new ScoreRequest[b];
            tokenStart = new int[b + 1];
            topStart = new int[b + 1];
            logitsStart = new int[b + 1];
            topK = new int[b];
            sum = new double[b];
            scored = new int[b];
        }
        for (int s = 0; s < b; s++) {
            ScoreRequest r = requests.get(s);
            int n = r.tokens().length;
            this.requests[s] = r;
            topK[s] = Math.min(r.topK(), vocab);
            tokenStart[s + 1] = tokenStart[s] + n;
            topStart[s + 1] = topStart[s] + n * topK[s];
            int rows = switch (r.logits()) {
                case NONE -> 0;
                case LAST -> 1;
                case ALL -> n;
            };
            logitsStart[s + 1] = logitsStart[s] + rows;
        }
        Arrays.fill(this.requests, b, this.requests.length, null);
        int t = tokenStart[b];
        if (tokenLogprobs.length < t) {
            tokenLogprobs = new float[t];
            argmax = new int[t];
        }
        if (topIds.length < topStart[b]) {
            topIds = new int[topStart[b]];
            topLogprobs = new float[topStart[b]];
        }
        long logitsFloats = (long) logitsStart[b] * vocab;
        if (logitsFloats > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(
                    logitsStart[b] + " logits rows of vocab " + vocab + " do not fit one array; score fewer");
        }
        if (logits.length < logitsFloats) {
            logits = new float[(int) logitsFloats];
        }
        Arrays.fill(tokenLogprobs, 0, t, Float.NaN);
        Arrays.fill(argmax, 0, t, -1);
        Arrays.fill(sum, 0, b, 0);
        Arrays.fill(scored, 0, b, 0);
    }

    /**
     * The positions whose logits are needed, in packed order: row j is position pos[j] of sequence seq[j]. Both
     * arrays hold at least every token of the batch; returns the number of rows.
     */
    public int neededRows(int[] seq, int[] pos) {
        int needed = 0;
        for (int s = 0; s < sequences; s++) {
            for (int i = 0; i < length(s); i++) {
                if (needs(s, i)) {
                    seq[needed] = s;
                    pos[needed++] = i;
                }
            }
        }
        return needed;
    }

    private boolean needs(int s, int i) {
        return target(s, i) >= 0 || keepsLogits(s, i);
    }

    private boolean keepsLogits(int s, int i) {
        LogitsMode mode = requests[s].logits();
        return mode == LogitsMode.ALL || (mode == LogitsMode.LAST && i == length(s) - 1);
    }

    /** The token position i of sequence s predicts when its log-prob is scored, else -1. */
    public int target(int s, int i) {
        int[] tokens = requests[s].tokens();
        return i + 1 < tokens.length && i + 1 >= requests[s].scoreFrom() ? tokens[i + 1] : -1;
    }

    /** Whether accepting position i of sequence s needs its whole logits row (top-k or logits asked for), not just its stats. */
    public boolean needsRow(int s, int i) {
        return topK[s] > 0 || keepsLogits(s, i);
    }

    /**
     * Position i of sequence s from its log-sum-exp, argmax and the logit of its target ({@link #target}); row (from
     * off) is its logits, needed only where {@link #needsRow} says so (else null).
     */
    public void accept(int s, int i, double lse, int best, float targetLogit, float[] row, int off) {
        argmax[tokenStart[s] + i] = best;
        if (keepsLogits(s, i)) {
            int r = requests[s].logits() == LogitsMode.ALL ? i : 0;
            System.arraycopy(row, off, logits, (logitsStart[s] + r) * vocab, vocab);
        }
        if (target(s, i) >= 0) {
            double lp = targetLogit - lse;
            tokenLogprobs[tokenStart[s] + i + 1] = (float) lp;
            sum[s] += lp;
            scored[s]++;
            int k = topK[s];
            if (k > 0) {
                int o = topStart[s] + (i + 1) * k;
                LogSoftmax.topK(row, off, vocab, k, topIds, o);
                for (int j = 0; j < k; j++) {
                    topLogprobs[o + j] = (float) (row[off + topIds[o + j]] - lse);
                }
            }
        }
    }

    public int sequences() {
        return sequences;
    }

    /** Tokens of sequence s. */
    public int length(int s) {
        return tokenStart[s + 1] - tokenStart[s];
    }

    /** Where sequence s's positions start in {@link #tokenLogprobs} and {@link #argmax}. */
    public int tokenStart(int s) {
        return tokenStart[s];
    }

    /** [T] log p(t[k] | t[0..k)) of every sequence's positions, NaN where not scored; valid to {@link #tokenStart}(sequences). */
    public float[] tokenLogprobs() {
        return tokenLogprobs;
    }

    public double sumLogprob(int s) {
        return sum[s];
    }

    public int numScored(int s) {
        return scored[s];
    }

    /** Sequence s's mean log-prob over its scored tokens; NaN when nothing was scored, as {@link SequenceScore#meanLogprob}. */
    public double meanLogprob(int s) {
        return scored[s] == 0 ? Double.NaN : sum[s] / scored[s];
    }

    /** exp(-mean log-prob); NaN when nothing was scored, as {@link SequenceScore#perplexity}. */
    public double perplexity(int s) {
        return scored[s] == 0 ? Double.NaN : Math.exp(-meanLogprob(s));
    }

    /** Whether position k of sequence s was scored, so it has a log-prob and (with top-k) alternatives. */
    public boolean isScored(int s, int k) {
        return k >= requests[s].scoreFrom() && k < length(s);
    }

    /** Alternatives kept per scored position of sequence s: its request's top-k, at most the vocabulary. */
    public int topK(int s) {
        return topK[s];
    }

    /** Where position k of sequence s keeps its {@link #topK}(s) ids and log-probs, largest first. */
    public int topOffset(int s, int k) {
        return topStart[s] + k * topK[s];
    }

    public int[] topIds() {
        return topIds;
    }

    public float[] topLogprobs() {
        return topLogprobs;
    }

    /** Logits rows sequence s keeps: 0 (NONE), 1 (LAST) or its length (ALL). */
    public int logitsRows(int s) {
        return logitsStart[s + 1] - logitsStart[s];
    }

    /** Where row r of sequence s's logits starts in {@link #logits}. */
    public int logitsOffset(int s, int r) {
        return (logitsStart[s] + r) * vocab;
    }

    public float[] logits() {
        return logits;
    }

    public int vocab() {
        return vocab;
    }

    /** Sequence s's scores copied into their own arrays. */
    public SequenceScore sequence(int s) {
        int n = length(s);
        int t0 = tokenStart[s];
        int k = topK[s];
        int[][] ids = k > 0 ? new int[n][] : null;
        float[][] lps = k > 0 ? new float[n][] : null;
        for (int p = 0; k > 0 && p < n; p++) {
            if (isScored(s, p)) {
                int o = topOffset(s, p);
                ids[p] = Arrays.copyOfRange(topIds, o, o + k);
                lps[p] = Arrays.copyOfRange(topLogprobs, o, o + k);
            }
        }
        float[][] rows = null;
        if (requests[s].logits() != LogitsMode.NONE) {
            rows = new float[logitsRows(s)][];
            for (int r = 0; r < rows.length; r++) {
                rows[r] = Arrays.copyOfRange(logits, logitsOffset(s, r), logitsOffset(s, r) + vocab);
            }
        }
        return new SequenceScore(
                Arrays.copyOfRange(tokenLogprobs, t0, t0 + n),
                ids,
                lps,
                sum[s],
                scored[s],
                rows,
                Arrays.copyOfRange(argmax, t0, t0 + n));
    }

    /** Every sequence's scores, copied. */
    public List<SequenceScore> toList() {
        List<SequenceScore> out = new ArrayList<>(sequences);
        for (int s = 0; s < sequences; s++) {
            out.add(sequence(s));
        }
        return out;
    }
}
