package dev.scorch.jobs.lmeval;

import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.jobs.lmeval.task.TaskConfig;

/**
 * How a generate_until task's requests are decoded, decided as lm-eval's HFLM._model_generate and transformers'
 * generate decide it. do_sample false: greedy. do_sample not given: greedy when the temperature is 0 (lm-eval then
 * sets do_sample false), else whatever the checkpoint's generation_config.json says. Sampling: the task's temperature,
 * then top_k and top_p, each the task's, else generation_config.json's, else transformers' defaults 50 and 1.0.
 * do_sample true with temperature 0 is refused, as transformers refuses it.
 *
 * @param sample      whether to sample; false: greedy (the other fields unused)
 * @param temperature the logits' divisor, above 0 when sampling
 */
public record HfSampling(boolean sample, double temperature, int topK, double topP) {
    public static final HfSampling GREEDY = new HfSampling(false, 0, 0, 1);

    /** transformers' GenerationConfig default top_k. */
    static final int HF_TOP_K = 50;

    /** The decoding a task's generation kwargs (--gen_kwargs applied) ask of this checkpoint; {@code at} names the task. */
    public static HfSampling of(TaskConfig.GenerationKwargs g, GenerationConfig checkpoint, String at) {
        Object doSample = g.all().get("do_sample");
        double t = g.temperature();
        boolean sample = doSample == null ? t != 0.0 && checkpoint.doSample() : Boolean.TRUE.equals(doSample);
        if (!sample) {
            return GREEDY;
        }
        if (!(t > 0)) {
            throw new IllegalArgumentException(at + "do_sample with temperature " + t
                    + ": sampling needs a temperature above 0 (transformers refuses it); set a temperature, or"
                    + " do_sample: false for greedy decoding");
        }
        Number topK = number(g, "top_k", at);
        Number topP = number(g, "top_p", at);
        if ((topK != null && topK.doubleValue() < 0)
                || (topP != null && !(topP.doubleValue() > 0 && topP.doubleValue() <= 1))) {
            throw new IllegalArgumentException(at + "generation_kwargs top_k " + topK + ", top_p " + topP
                    + ": expected top_k >= 0 and 0 < top_p <= 1");
        }
        return new HfSampling(
                true,
                t,
                topK != null ? topK.intValue() : checkpoint.topK() != null ? checkpoint.topK() : HF_TOP_K,
                topP != null ? topP.doubleValue() : checkpoint.topP() != null ? checkpoint.topP() : 1.0);
    }

    private static Number number(TaskConfig.GenerationKwargs g, String key, String at) {
        Object v = g.all().get(key);
        if (v == null || v instanceof Number) {
            return (Number) v;
        }
        throw new IllegalArgumentException(at + "generation_kwargs " + key + " " + v + ": expected a number");
    }
}
