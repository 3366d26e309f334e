package dev.scorch.jobs.eval;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * multiple_choice: the log-likelihood of each choice as a continuation of the context (the score job's continuation
 * scoring: context tokens with BOS, then the choice's tokens; only the choice's are summed). {@code acc}: the choice
 * with the largest sum is the gold one; {@code acc_norm}: the same with each sum divided by the choice's length in
 * UTF-8 bytes (in tokens for token-id data), as log-likelihood harnesses define them. Ties go to the lower index.
 * Roles: context, choices (a list), gold (the right choice's index), id (optional).
 */
final class MultipleChoiceTask extends ScoredTask {
    static final StructType EXAMPLES = new StructType()
            .add("example_id", DataTypes.StringType)
            .add("gold", DataTypes.IntegerType)
            .add("pred", DataTypes.IntegerType)
            .add("pred_norm", DataTypes.IntegerType)
            .add("acc", DataTypes.DoubleType)
            .add("acc_norm", DataTypes.DoubleType)
            .add("choice_logprobs", new ArrayType(DataTypes.DoubleType, false))
            .add("error", DataTypes.StringType);

    private final int[] gold;
    private final int[] contextLen;
    private final double[][] choiceLength; // [example][choice]: bytes, or tokens for token-id data

    MultipleChoiceTask(EvalData data) {
        super(data);
        int n = data.size();
        gold = new int[n];
        contextLen = new int[n];
        choiceLength = new double[n][];
        prepareAll();
    }

    @Override
    void prepare(int i) {
        int[] context = data.tokens(data.value(i, "context"), "context", true);
        Object choices = data.value(i, "choices");
        if (!(choices instanceof scala.collection.Seq<?> list) || list.isEmpty()) {
            throw new IllegalArgumentException("choices must be a non-empty list");
        }
        Object g = data.value(i, "gold");
        if (!(g instanceof Number num) || num.intValue() < 0 || num.intValue() >= list.size()) {
            throw new IllegalArgumentException("gold " + g + " is not an index into the " + list.size() + " choices");
        }
        gold[i] = num.intValue();
        contextLen[i] = context.length;
        choiceLength[i] = new double[list.size()];
        for (int j = 0; j < list.size(); j++) {
            Object c = list.apply(j);
            int[] cont = data.tokens(c, "choice " + j, false);
            choiceLength[i][j] = c instanceof String s ? s.getBytes(StandardCharsets.UTF_8).length : cont.length;
            int[] all = java.util.Arrays.copyOf(context, context.length + cont.length);
            System.arraycopy(cont, 0, all, context.length, cont.length);
            add(i, j, all);
        }
    }

    @Override
    public Result finish(Map<String, Scored> scored, Map<String, Generated> generated) {
        List<Row> examples = new ArrayList<>();
        List<Double> acc = new ArrayList<>();
        List<Double> accNorm = new ArrayList<>();
        for (int i = 0; i < data.size(); i++) {
            String err = errors[i];
            double[] lls = null;
            if (err == null) {
                lls = new double[choiceLength[i].length];
                for (int j = 0; j < lls.length && err == null; j++) {
                    Scored s = TaskRun.resultOf(scored, rowId(i, j));
                    if (s.error() != null) {
                        err = "choice " + j + ": " + s.error();
                    } else {
                        for (int k = contextLen[i]; k < s.tokenLogprobs().length; k++) {
                            lls[j] += s.tokenLogprobs()[k];
                        }
                    }
                }
            }
            if (err != null) {
                examples.add(RowFactory.create(
                        data.id(i), errors[i] == null ? gold[i] : null, null, null, null, null, null, err));
                continue;
            }
            int pred = 0;
            int predNorm = 0;
            for (int j = 1; j < lls.length; j++) {
                pred = lls[j] > lls[pred] ? j : pred;
                predNorm = lls[j] / choiceLength[i][j] > lls[predNorm] / choiceLength[i][predNorm] ? j : predNorm;
            }
            double a = pred == gold[i] ? 1 : 0;
            double an = predNorm == gold[i] ? 1 : 0;
            acc.add(a);
            accNorm.add(an);
            examples.add(RowFactory.create(
                    data.id(i),
                    gold[i],
                    pred,
                    predNorm,
                    a,
                    an,
                    java.util.Arrays.stream(lls).boxed().toList(),
                    null));
        }
        long failed = data.size() - acc.size();
        return new Result(
                EXAMPLES,
                examples,
                List.of(Stats.proportion("acc", acc, failed), Stats.proportion("acc_norm", accNorm, failed)));
    }
}
