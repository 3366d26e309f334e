package dev.scorch.jobs.eval;

import java.util.ArrayList;
import java.util.List;

/**
 * A task whose examples become score-job sequences: each example is prepared once (its sequences added, or its
 * error kept), and its k-th sequence is named TASK/EXAMPLE/k.
 */
abstract class ScoredTask implements TaskRun {
    final EvalData data;
    final String[] errors;
    final List<ScoreRow> rows = new ArrayList<>();

    ScoredTask(EvalData data) {
        this.data = data;
        this.errors = new String[data.size()];
    }

    /** Turns example i into sequences (through {@link #add}), or throws IllegalArgumentException with its problem. */
    abstract void prepare(int i);

    /** Prepares every example; subclasses call it once their own fields exist. */
    final void prepareAll() {
        for (int i = 0; i < data.size(); i++) {
            int before = rows.size();
            try {
                prepare(i);
            } catch (IllegalArgumentException e) {
                errors[i] = e.getMessage();
                rows.subList(before, rows.size()).clear(); // none of a failed example's sequences are scored
            }
        }
    }

    void add(int i, int k, int[] tokens) {
        rows.add(new ScoreRow(rowId(i, k), tokens));
    }

    String rowId(int i, int k) {
        return data.task.name() + "/" + i + "/" + k;
    }

    @Override
    public EvalSuite.Task task() {
        return data.task;
    }

    @Override
    public List<ScoreRow> scoreRows() {
        return rows;
    }
}
