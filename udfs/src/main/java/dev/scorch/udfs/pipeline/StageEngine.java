package dev.scorch.udfs.pipeline;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import java.util.List;

/** What one pipeline stage computes on its node: decoder layers [first, end) of the model. */
public interface StageEngine {
    /** The first layer this stage runs. */
    int first();

    /** One past the last layer this stage runs. */
    int end();

    /**
     * A stage before the last: its layers over batch, from its token ids (the first stage, in null) or from the
     * previous stage's hidden states in [T, hidden]; returns the hidden states [T, hidden] to hand on.
     */
    float[] forward(PackedBatch batch, float[] in);

    /**
     * The last stage: its layers over batch from in (null when it is also the first), then model.norm, lm_head and
     * the log-softmax scores requests ask for, into out.
     */
    void score(List<ScoreRequest> requests, PackedBatch batch, float[] in, BatchScores out);
}
