package dev.scorch.engine.device;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import java.util.List;

/**
 * Log-prob scoring on the last {@link DecoderStage} of a pipeline whose earlier stages ran elsewhere (another node): the
 * stage's layers over the hidden states [T, hidden] handed to it, then lm_head and the log-softmax stats, a chunk of
 * rows at a time through {@link GpuScorer}'s own code, so the same kernels in the same order and the same bits.
 */
public final class StageScorer {
    private final DecoderStage stage;

    public StageScorer(DecoderStage stage) {
        if (!stage.isLast()) {
            throw new IllegalArgumentException(
                    "scoring needs the last stage (lm_head); this one holds layers [" + stage.first() + ", "
                            + stage.end() + ") of " + stage.config().numHiddenLayers());
        }
        this.stage = stage;
    }

    /**
     * Scores requests, packed as batch (positions from 0), into out: in is the previous stage's hidden states [T,
     * hidden], or null when this stage is also the first.
     */
    public void score(List<ScoreRequest> requests, PackedBatch batch, float[] in, BatchScores out) {
        int vocab = stage.config().vocabSize();
        out.reset(requests, vocab);
        int[] neededSeq = new int[batch.numTokens()];
        int[] neededPos = new int[batch.numTokens()];
        int needed = out.neededRows(neededSeq, neededPos);
        stage.forward(batch, null, null, in, hidden -> {
            GpuScorer.acceptRows(out, batch, 0, neededSeq, neededPos, 0, needed, stage, hidden);
            return null;
        });
    }
}
