package dev.scorch.engine.scoring;

/**
 * One sequence to score.
 *
 * @param tokens    the token ids
 * @param scoreFrom index of the first token whose log-prob counts (1 scores every token after the first;
 *                  the prompt length scores only a continuation)
 * @param topK      alternatives to return per scored token (0 for none)
 * @param logits    which positions' logits to return
 * @param sharedPrefix where a prefix this sequence shares with others ends, 0 if none: a few-shot prompt's examples
 *                  before the document's own text. Only {@link PrefixSharingScorer} reads it (see there).
 */
public record ScoreRequest(int[] tokens, int scoreFrom, int topK, LogitsMode logits, int sharedPrefix) {
    public ScoreRequest(int[] tokens, int scoreFrom, int topK, LogitsMode logits) {
        this(tokens, scoreFrom, topK, logits, 0);
    }

    public ScoreRequest {
        if (tokens == null || tokens.length == 0) {
            throw new IllegalArgumentException("a sequence to score needs at least one token");
        }
        if (scoreFrom < 1 || scoreFrom > tokens.length) {
            throw new IllegalArgumentException("scoreFrom " + scoreFrom + " outside [1, " + tokens.length + "]");
        }
        if (topK < 0) {
            throw new IllegalArgumentException("topK must be >= 0");
        }
        if (sharedPrefix < 0 || sharedPrefix > tokens.length) {
            throw new IllegalArgumentException("sharedPrefix " + sharedPrefix + " outside [0, " + tokens.length + "]");
        }
    }

    public static ScoreRequest of(int[] tokens) {
        return new ScoreRequest(tokens, 1, 0, LogitsMode.NONE);
    }

    /** Scores only the continuation's tokens, given the prompt. */
    public static ScoreRequest continuation(int[] prompt, int[] continuation, int topK, LogitsMode logits) {
        int[] all = new int[prompt.length + continuation.length];
        System.arraycopy(prompt, 0, all, 0, prompt.length);
        System.arraycopy(continuation, 0, all, prompt.length, continuation.length);
        return new ScoreRequest(all, Math.max(1, prompt.length), topK, logits);
    }
}
