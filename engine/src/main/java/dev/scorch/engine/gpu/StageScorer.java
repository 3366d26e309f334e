package dev.scorch.engine.gpu;

import dev.scorch.engine.runtime.PackedBatch;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.ScoreRequest;
import java.util.List;

/**
 * Log-prob scoring on the last {@link GpuStage} of a pipeline whose earlier stages ran elsewhere (another node): the
 * stage's layers over the hidden states [T, hidden] handed to it, then lm_head and the log-softmax stats, a chunk of
 * rows at a time, as {@link GpuScorer} scores a whole model. Same kernels in the same order, so the same bits.
 */
public final class StageScorer {
    private final GpuStage stage;

    public StageScorer(GpuStage stage) {
        if (!stage.isLast()) {
            throw new IllegalArgumentException(
                    "scoring needs the last stage (lm_head); this one holds layers [" + stage.first() + ", "
                            + stage.end() + ") of " + stage.config().numHiddenLayers());
        }
        this.stage = stage;
    }

    public GpuStage stage() {
        return stage;
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
        Device dev = stage.device();
        stage.forward(batch, null, null, in, hidden -> {
            int chunk = Math.max(1, Math.min(needed, GpuScorer.LOGITS_CHUNK_FLOATS / vocab));
            float[] stats = new float[3 * chunk];
            float[] rowsHost = null;
            for (int c0 = 0; c0 < needed; c0 += chunk) {
                int rows = Math.min(chunk, needed - c0);
                int[] rowIds = new int[rows];
                int[] targets = new int[rows];
                boolean wholeRows = false;
                for (int j = 0; j < rows; j++) {
                    int s = neededSeq[c0 + j];
                    int pos = neededPos[c0 + j];
                    rowIds[j] = batch.seqStart()[s] + pos;
                    targets[j] = out.target(s, pos);
                    wholeRows |= out.needsRow(s, pos);
                }
                long[] mark = stage.markScratch();
                Buf[] ls = stage.logits(hidden, rowIds, targets);
                dev.read(ls[1], stats, 0, 3 * rows);
                if (wholeRows) {
                    if (rowsHost == null) {
                        rowsHost = new float[chunk * vocab];
                    }
                    dev.read(ls[0], rowsHost, 0, rows * vocab);
                }
                for (int j = 0; j < rows; j++) {
                    out.accept(
                            neededSeq[c0 + j],
                            neededPos[c0 + j],
                            stats[3 * j],
                            (int) stats[3 * j + 2],
                            stats[3 * j + 1],
                            rowsHost,
                            j * vocab);
                }
                stage.releaseScratch(mark); // the next chunk reuses this one's scratch
            }
            return null;
        });
    }
}
