package dev.scorch.engine.scoring;

import java.util.List;

/** Scores a batch of sequences in one prefill: the CPU {@link Scorer}, or a GPU one. */
public interface BatchScorer {
    /** Scores requests into into, which is reset to them first; a kept one is reused, so steady scoring allocates no results. */
    void score(List<ScoreRequest> requests, BatchScores into);

    /** Scores requests, each sequence's scores in its own arrays. */
    default List<SequenceScore> score(List<ScoreRequest> requests) {
        BatchScores scores = new BatchScores();
        score(requests, scores);
        return scores.toList();
    }
}
