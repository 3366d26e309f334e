package dev.scorch.engine.generation;

/**
 * One generated continuation.
 *
 * @param tokenIds     the generated ids (a stop id is not included; the token that completed a stop string is)
 * @param logprobs     log p of each generated id under the model (before penalties and temperature)
 * @param topIds       per generated token, the request's top_logprobs most likely ids, most likely first (null when
 *                     none were asked for)
 * @param topLogprobs  their log-probs, same shape as topIds (null when none were asked for)
 * @param text         the decoded text (special tokens skipped), cut before a stop string; null without a tokenizer
 * @param finishReason why it ended
 * @param sample       which of the request's n samples this is
 * @param error        why it could not go on (finishReason ERROR: the model's logits were not finite), else null; what
 *                     was generated before is no result then
 */
public record Completion(
        int[] tokenIds,
        float[] logprobs,
        int[][] topIds,
        float[][] topLogprobs,
        String text,
        FinishReason finishReason,
        int sample,
        String error) {

    public enum FinishReason {
        /** A stop string was produced. */
        STOP,
        /** max_new_tokens was reached. */
        LENGTH,
        /** A stop token id (EOS) was produced. */
        EOS,
        /** The next token could not be chosen: see {@link Completion#error}. */
        ERROR
    }
}
