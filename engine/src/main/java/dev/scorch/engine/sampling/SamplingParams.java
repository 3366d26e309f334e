package dev.scorch.engine.sampling;

/**
 * How one row's next tokens are chosen.
 *
 * @param temperature       0 = greedy (ties to the lowest id); else logits are divided by it
 * @param topK              keep the k most likely tokens (0 = all)
 * @param topP              keep the smallest most-likely set whose probability reaches top_p (1 = all)
 * @param minP              drop tokens less likely than min_p × the most likely one's probability (0 = none)
 * @param repetitionPenalty Hugging Face style, over prompt and output: positive logits ÷ it, negative × it (1 = none)
 * @param presencePenalty   OpenAI style, over the output: minus it once for every token already generated
 * @param frequencyPenalty  OpenAI style, over the output: minus it times the token's count so far
 * @param seed              the row's seed: its draws depend only on this seed, the sample index and the step
 */
public record SamplingParams(
        double temperature,
        int topK,
        double topP,
        double minP,
        double repetitionPenalty,
        double presencePenalty,
        double frequencyPenalty,
        long seed)
        implements java.io.Serializable {

    public SamplingParams {
        if (temperature < 0 || topK < 0 || topP <= 0 || topP > 1 || minP < 0 || minP > 1 || repetitionPenalty <= 0) {
            throw new IllegalArgumentException(
                    "sampling parameters out of range: temperature >= 0, top_k >= 0, 0 < top_p <= 1,"
                            + " 0 <= min_p <= 1, repetition_penalty > 0");
        }
    }

    public static SamplingParams greedy() {
        return new SamplingParams(0, 0, 1, 0, 1, 0, 0, 0);
    }

    public static SamplingParams temperature(double t, long seed) {
        return new SamplingParams(t, 0, 1, 0, 1, 0, 0, seed);
    }

    public boolean isGreedy() {
        return temperature == 0;
    }
}
