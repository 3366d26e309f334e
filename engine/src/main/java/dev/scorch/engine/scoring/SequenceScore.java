package dev.scorch.engine.scoring;

/**
 * Scores of one sequence. Arrays indexed by token position k hold the prediction of token k from tokens
 * [0, k): entries before {@code scoreFrom} (always position 0) are NaN / null.
 *
 * @param tokenLogprobs [n] log p(t[k] | t[0..k)), NaN where not scored
 * @param topIds        [n][top_k] most likely ids at each scored position (null rows where not scored)
 * @param topLogprobs   [n][top_k] their log-probs
 * @param sumLogprob    sum over scored tokens
 * @param numScored     scored tokens
 * @param logits        [rows][vocab]: the last position's (LAST) or every position's (ALL) logits; null for NONE
 * @param argmax        [n] greedy next token after each position where logits were computed, else -1
 */
public record SequenceScore(
        float[] tokenLogprobs,
        int[][] topIds,
        float[][] topLogprobs,
        double sumLogprob,
        int numScored,
        float[][] logits,
        int[] argmax) {

    public double meanLogprob() {
        return numScored == 0 ? Double.NaN : sumLogprob / numScored;
    }

    /** exp(-mean log-prob); NaN when nothing was scored (a one-token sequence). */
    public double perplexity() {
        return numScored == 0 ? Double.NaN : Math.exp(-meanLogprob());
    }
}
