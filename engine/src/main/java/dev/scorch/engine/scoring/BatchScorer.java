package dev.scorch.engine.scoring;

import java.util.List;

/** Scores a batch of sequences in one prefill: the CPU {@link Scorer}, or a GPU one. */
public interface BatchScorer {
    /** Scores requests into into, which is reset to them first; a kept one is reused, so steady scoring allocates no results. */
    void score(List<ScoreRequest> requests, BatchScores into);

    /**
     * Scores batches, batch k into into.get(k), as {@link #score(List, BatchScores)} would one by one. A scorer that can
     * work on several batches at once (a pipeline across nodes) overrides it.
     */
    default void scoreAll(List<List<ScoreRequest>> batches, List<BatchScores> into) {
        for (int k = 0; k < batches.size(); k++) {
            score(batches.get(k), into.get(k));
        }
    }

    /** Scores requests, each sequence's scores in its own arrays. */
    default List<SequenceScore> score(List<ScoreRequest> requests) {
        BatchScores scores = new BatchScores();
        score(requests, scores);
        return scores.toList();
    }
}
