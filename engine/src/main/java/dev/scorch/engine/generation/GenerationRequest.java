package dev.scorch.engine.generation;

import dev.scorch.engine.sampling.SamplingParams;
import java.util.List;
import java.util.Set;

/**
 * One prompt to continue.
 *
 * @param prompt       the prompt's token ids
 * @param params       how tokens are chosen (seed included)
 * @param maxNewTokens the most tokens to generate
 * @param stopTokenIds ids that end a completion (EOS from generation_config.json goes here); not emitted
 * @param stopStrings  texts that end a completion (needs a tokenizer); the text is cut before them
 * @param n            completions to sample (sample index s draws its own stream from the seed)
 * @param topLogprobs  most likely alternatives to report per generated token (0 = none)
 */
public record GenerationRequest(
        int[] prompt,
        SamplingParams params,
        int maxNewTokens,
        Set<Integer> stopTokenIds,
        List<String> stopStrings,
        int n,
        int topLogprobs) {

    public GenerationRequest {
        if (prompt == null || prompt.length == 0) {
            throw new IllegalArgumentException("a prompt needs at least one token");
        }
        if (maxNewTokens < 1 || n < 1 || topLogprobs < 0) {
            throw new IllegalArgumentException("max_new_tokens and n must be >= 1, top_logprobs >= 0");
        }
        stopTokenIds = Set.copyOf(stopTokenIds);
        stopStrings = List.copyOf(stopStrings);
        for (String s : stopStrings) {
            if (s.isEmpty()) {
                throw new IllegalArgumentException("a stop string must not be empty");
            }
        }
    }

    /** Tokens of KV cache one sample of this request needs at most. */
    public int maxCacheTokens() {
        return prompt.length + maxNewTokens;
    }
}
