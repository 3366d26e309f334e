package dev.scorch.jobs.eval;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * generate_match: a greedy completion of the prompt (the generate job, temperature 0, the task's stop strings and
 * max_new_tokens) against a reference. {@code exact_match}: equal after trimming surrounding whitespace;
 * {@code normalized_match}: equal after lower-casing and removing punctuation, the articles a/an/the and extra
 * whitespace (SQuAD's answer normalisation). Roles: prompt (text or token ids), reference, id (optional).
 */
final class GenerateMatchTask implements TaskRun {
    static final StructType EXAMPLES = new StructType()
            .add("example_id", DataTypes.StringType)
            .add("completion", DataTypes.StringType)
            .add("reference", DataTypes.StringType)
            .add("finish_reason", DataTypes.StringType)
            .add("exact_match", DataTypes.DoubleType)
            .add("normalized_match", DataTypes.DoubleType)
            .add("error", DataTypes.StringType);

    private static final Pattern PUNCTUATION = Pattern.compile("\\p{Punct}");
    private static final Pattern ARTICLES = Pattern.compile("\\b(a|an|the)\\b");
    private static final Pattern SPACES = Pattern.compile("\\s+");

    private final EvalData data;
    private final String[] errors;
    private final List<GenerateRow> rows = new ArrayList<>();

    GenerateMatchTask(EvalData data) {
        this.data = data;
        errors = new String[data.size()];
        for (int i = 0; i < data.size(); i++) {
            try {
                if (data.text(i, "reference") == null) {
                    throw new IllegalArgumentException("reference must be text");
                }
                if (data.tokenizer() == null) {
                    throw new IllegalArgumentException("generate_match compares text and this model has no tokenizer");
                }
                int[] prompt = data.tokens(data.value(i, "prompt"), "prompt", true);
                rows.add(new GenerateRow(rowId(i), prompt, data.task.maxNewTokens(), data.task.stop()));
            } catch (IllegalArgumentException e) {
                errors[i] = e.getMessage();
            }
        }
    }

    private String rowId(int i) {
        return data.task.name() + "/" + i;
    }

    @Override
    public EvalSuite.Task task() {
        return data.task;
    }

    @Override
    public List<GenerateRow> generateRows() {
        return rows;
    }

    static String normalize(String s) {
        String t = PUNCTUATION.matcher(s.toLowerCase(Locale.ROOT)).replaceAll("");
        t = ARTICLES.matcher(t).replaceAll(" ");
        return SPACES.matcher(t).replaceAll(" ").trim();
    }

    @Override
    public Result finish(Map<String, Scored> scored, Map<String, Generated> generated) {
        List<Row> examples = new ArrayList<>();
        List<Double> exact = new ArrayList<>();
        List<Double> normalized = new ArrayList<>();
        for (int i = 0; i < data.size(); i++) {
            String reference = data.text(i, "reference");
            String err = errors[i];
            Generated g = err == null ? TaskRun.resultOf(generated, rowId(i)) : null;
            if (g != null && g.error() != null) {
                err = g.error();
            }
            if (err != null) {
                examples.add(RowFactory.create(data.id(i), null, reference, null, null, null, err));
                continue;
            }
            double em = g.completion().strip().equals(reference.strip()) ? 1 : 0;
            double nm = normalize(g.completion()).equals(normalize(reference)) ? 1 : 0;
            exact.add(em);
            normalized.add(nm);
            examples.add(RowFactory.create(data.id(i), g.completion(), reference, g.finishReason(), em, nm, null));
        }
        long failed = data.size() - exact.size();
        return new Result(
                EXAMPLES,
                examples,
                List.of(
                        Stats.proportion("exact_match", exact, failed),
                        Stats.proportion("normalized_match", normalized, failed)));
    }
}
