package dev.scorch.engine.generation;

/**
 * One generated continuation.
 *
 * @param tokenIds     the generated ids (a stop id is not included)
 * @param logprobs     log p of each generated id under the model (before penalties and temperature)
 * @param finishReason why it ended
 * @param sample       which of the request's n samples this is
 */
public record Completion(int[] tokenIds, float[] logprobs, FinishReason finishReason, int sample) {

  public enum FinishReason {
    /** A stop string was produced. */
    STOP,
    /** max_new_tokens was reached. */
    LENGTH,
    /** A stop token id (EOS) was produced. */
    EOS
  }
}
