package dev.scorch.jobs.eval;

import java.nio.file.Path;

/**
 * One eval run: the model, the suite, where results go, the run's id, the run to compare with (null: none), and
 * how the score and generate jobs it runs are laid out.
 */
public record EvalSpec(
        Path model,
        Path suite,
        String output,
        String runId,
        String compareTo,
        int partitions,
        int threads,
        String weights,
        int maxBatchTokens) {}
