package dev.scorch.engine.scoring;

import java.util.List;

/** Scores a batch of sequences in one prefill: the CPU {@link Scorer}, or a GPU one. */
public interface BatchScorer {
  List<SequenceScore> score(List<ScoreRequest> requests);
}
