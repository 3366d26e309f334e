package dev.scorch.jobs.lmeval;

import java.util.List;
import java.util.Map;

/**
 * Chooses the few-shot examples for one evaluation document, as lm-eval's samplers do. A sampler may hold a random
 * stream that every call advances (lm-eval's default one does): call it once per evaluation document, in lm-eval's
 * document order, to get lm-eval's choices.
 *
 * @param <T> a document; lm-eval compares documents with Python's {@code ==}, here {@link Object#equals}
 */
public interface FewShotSampler<T> {
    /**
     * The n examples, in prompt order.
     *
     * @param evalDoc the document being evaluated when the few-shot pool is the evaluation split (lm-eval passes it
     *     exactly when the few-shot split's name equals the test split's), so that it is never its own example; else
     *     null
     */
    List<T> sample(int n, T evalDoc);

    /** lm-eval's fewshot_random_seed default ({@code DEFAULT_OTHER_SEED}), which the evaluator gives every task. */
    long DEFAULT_SEED = 1234;

    /**
     * The sampler that lm-eval's {@code fewshot_config.sampler} names: "default" (random) or "first_n". lm-eval's
     * registry has no other; its BalancedSampler and ManualSampler are unregistered stubs that raise, so they are
     * refused here too.
     */
    static <T> FewShotSampler<T> named(String name, List<T> pool, long seed) {
        return switch (name == null ? "default" : name) {
            case "default" -> new RandomFewShotSampler<>(pool, new PyRandom(seed));
            case "first_n" -> new FirstNFewShotSampler<>(pool);
            default ->
                throw new IllegalArgumentException("fewshot_config.sampler '" + name
                        + "' is not supported: lm-eval registers only 'default' and 'first_n'");
        };
    }

    /** True when Python would treat the document as falsy ({@code not eval_doc}): null or an empty dict. */
    static boolean pyFalsy(Object doc) {
        return doc == null || (doc instanceof Map<?, ?> m && m.isEmpty());
    }
}
