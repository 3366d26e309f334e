package dev.scorch.udfs.score;

import dev.scorch.engine.kernels.Ops;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.runtime.TokenBudgetBatcher;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.ModelSource;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.StructType;

/**
 * The score job's mapPartitions engine. It streams its partition a window at a time (never collecting
 * it): each window's rows are checked (bad rows become error rows at once), sorted by length and cut into
 * token-budget batches, scored, and emitted before the next window is read. Every input row yields
 * exactly one output row.
 */
public final class ScorePartitionFunction implements MapPartitionsFunction<Row, Row> {
  private final ModelSource source;
  private final ScoreOptions options;
  private final StructType outputSchema;
  private final String modelLabel;
  private final ScoreMetrics metrics;

  public ScorePartitionFunction(ModelSource source, ScoreOptions options, StructType outputSchema, String modelLabel,
      ScoreMetrics metrics) {
    this.source = source;
    this.options = options;
    this.outputSchema = outputSchema;
    this.modelLabel = modelLabel;
    this.metrics = metrics;
  }

  /** One row on its way through the window: scored (tokens set) or failed (error set). */
  private static final class Pending {
    final Object id;
    int[] tokens;
    String error;
    SequenceScore score;

    Pending(Object id) {
      this.id = id;
    }
  }

  @Override
  public Iterator<Row> call(Iterator<Row> input) {
    DeepseekV3Model model = ExecutorModelCache.model(source);
    Ops ops = ExecutorModelCache.ops(options.threads());
    Scorer scorer = new Scorer(model, ops);
    return new Iterator<>() {
      private final ArrayDeque<Row> ready = new ArrayDeque<>();

      @Override
      public boolean hasNext() {
        while (ready.isEmpty() && input.hasNext()) {
          scoreWindow(readWindow(input, model), scorer, ready);
        }
        return !ready.isEmpty();
      }

      @Override
      public Row next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return ready.poll();
      }
    };
  }

  private List<Pending> readWindow(Iterator<Row> input, DeepseekV3Model model) {
    List<Pending> window = new ArrayList<>();
    int idIdx = -1;
    while (window.size() < options.windowRows() && input.hasNext()) {
      Row r = input.next();
      if (idIdx < 0) {
        idIdx = r.fieldIndex(ScoreSchema.ID);
      }
      Pending p = new Pending(r.get(idIdx));
      window.add(p);
      String where = r.getAs(ScoreSchema.SOURCE);
      if (p.id == null) {
        p.error = "id is null (input row " + where + ")";
        continue;
      }
      int ti = r.fieldIndex(ScoreSchema.TOKEN_IDS);
      String prompt = r.getAs(ScoreSchema.PROMPT);
      if (r.isNullAt(ti) && prompt != null) {
        p.error = prompt.isEmpty() ? "prompt is empty"
            : "text input needs a tokenizer; this model has none yet (give token_ids instead)";
        continue;
      }
      Object checked = RowCheck.tokens(r.isNullAt(ti) ? null : r.getList(ti), model.vocabSize(),
          model.config().maxPositionEmbeddings());
      if (checked instanceof String err) {
        p.error = err;
      } else {
        p.tokens = (int[]) checked;
      }
    }
    return window;
  }

  private void scoreWindow(List<Pending> window, Scorer scorer, ArrayDeque<Row> ready) {
    List<Pending> ok = new ArrayList<>();
    for (Pending p : window) {
      if (p.error == null) {
        ok.add(p);
      }
    }
    for (List<Pending> batch : TokenBudgetBatcher.batches(ok, p -> p.tokens.length, options.maxBatchTokens())) {
      List<ScoreRequest> reqs = new ArrayList<>(batch.size());
      long tokens = 0;
      for (Pending p : batch) {
        reqs.add(new ScoreRequest(p.tokens, 1, options.topK(), options.logits()));
        tokens += p.tokens.length;
      }
      List<SequenceScore> scores = scorer.score(reqs);
      for (int i = 0; i < batch.size(); i++) {
        batch.get(i).score = scores.get(i);
      }
      metrics.batches().add(1);
      metrics.tokens().add(tokens);
    }
    for (Pending p : window) {
      ready.add(p.error == null ? scoredRow(p) : errorRow(p));
      metrics.rows().add(1);
      if (p.error != null) {
        metrics.errors().add(1);
      }
    }
  }

  private Row scoredRow(Pending p) {
    SequenceScore s = p.score;
    int n = p.tokens.length;
    List<Object> values = new ArrayList<>(outputSchema.size());
    values.add(p.id);
    values.add(n);
    List<Integer> ids = new ArrayList<>(n);
    List<Float> lps = new ArrayList<>(n);
    for (int k = 0; k < n; k++) {
      ids.add(p.tokens[k]);
      lps.add(Float.isNaN(s.tokenLogprobs()[k]) ? null : s.tokenLogprobs()[k]);
    }
    values.add(seq(ids));
    values.add(seq(lps));
    values.add(s.sumLogprob());
    values.add(s.numScored() == 0 ? null : s.meanLogprob());
    values.add(s.numScored() == 0 ? null : s.perplexity());
    if (options.topK() > 0) {
      List<Object> top = new ArrayList<>(n);
      for (int k = 0; k < n; k++) {
        if (s.topIds()[k] == null) {
          top.add(null);
          continue;
        }
        List<Row> entries = new ArrayList<>();
        for (int j = 0; j < s.topIds()[k].length; j++) {
          entries.add(RowFactory.create(s.topIds()[k][j], s.topLogprobs()[k][j]));
        }
        top.add(seq(entries));
      }
      values.add(seq(top));
    }
    if (options.logits() != LogitsMode.NONE) {
      List<Object> rows = new ArrayList<>();
      for (float[] l : s.logits()) {
        List<Float> row = new ArrayList<>(l.length);
        for (float v : l) {
          row.add(v);
        }
        rows.add(seq(row));
      }
      values.add(seq(rows));
    }
    values.add(null);
    values.add(modelLabel);
    return RowFactory.create(values.toArray());
  }

  /** Spark's Row encoder takes Scala sequences for array columns. */
  static <T> scala.collection.Seq<T> seq(List<T> list) {
    return scala.jdk.javaapi.CollectionConverters.asScala(list);
  }

  private Row errorRow(Pending p) {
    Object[] values = new Object[outputSchema.size()];
    values[0] = p.id;
    values[values.length - 2] = p.error;
    values[values.length - 1] = modelLabel;
    return RowFactory.create(values);
  }

}
