package dev.scorch.jobs.lmeval.task;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongFunction;

/**
 * The few-shot samplers a task's {@code fewshot_config.sampler} may name, each made fresh per task from the
 * few-shot seed. {@code first_n} is built in; lm-eval's {@code default} (seeded random) sampler is
 * registered by the code that provides it ({@link #register}); until then a task that needs it is refused.
 */
public final class FewshotSamplers {
    private static final Map<String, LongFunction<FewshotSampler>> SAMPLERS = new ConcurrentHashMap<>();

    static {
        SAMPLERS.put("first_n", seed -> new FirstNSampler());
    }

    private FewshotSamplers() {}

    /** Makes {@code name} available; the factory gets the few-shot seed. */
    public static void register(String name, LongFunction<FewshotSampler> factory) {
        SAMPLERS.put(name, factory);
    }

    /** A fresh sampler for one task; IllegalArgumentException naming the task and sampler if there is none. */
    public static FewshotSampler create(TaskConfig task, long seed) {
        String name = task.fewshotConfig().sampler();
        LongFunction<FewshotSampler> f = SAMPLERS.get(name);
        if (f == null) {
            throw new IllegalArgumentException(TaskConfig.where(task.task(), task.file())
                    + "field 'fewshot_config.sampler': '"
                    + name + "' is not available (available: " + new java.util.TreeSet<>(SAMPLERS.keySet()) + ")"
                    + ("default".equals(name) ? "; 'default' is lm-eval's seeded random sampler" : ""));
        }
        return f.apply(seed);
    }
}
