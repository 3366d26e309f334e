package dev.scorch.jobs.eval;

import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.TokenizerException;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * A task's examples, read on the driver (evaluation sets are small), and the roles its kind reads from them. A
 * text role may also be given as token ids (an array of integers), for a checkpoint without a tokenizer.
 */
final class EvalData {
    final EvalSuite.Task task;
    final List<Row> rows;
    private final List<String> columns;
    private final Tokenizer tokenizer; // null when the model has none

    private EvalData(EvalSuite.Task task, List<Row> rows, List<String> columns, Tokenizer tokenizer) {
        this.task = task;
        this.rows = rows;
        this.columns = columns;
        this.tokenizer = tokenizer;
    }

    static EvalData load(SparkSession spark, EvalSuite.Task task, Tokenizer tokenizer, String... roles) {
        String p = task.data().toString().toLowerCase(Locale.ROOT);
        var df = p.endsWith(".parquet")
                ? spark.read().parquet(task.data().toString())
                : p.endsWith(".csv")
                        ? spark.read().option("header", "true").csv(task.data().toString())
                        : spark.read().json(task.data().toString());
        List<String> columns = Arrays.asList(df.columns());
        for (String role : roles) {
            if (!columns.contains(task.column(role))) {
                throw new IllegalArgumentException(
                        "task " + task.name() + ": " + task.data() + " has no column '" + task.column(role) + "' (its "
                                + role + "; columns: " + columns + "; map it under columns: in the suite)");
            }
        }
        return new EvalData(task, df.collectAsList(), columns, tokenizer);
    }

    int size() {
        return rows.size();
    }

    /** The example's id column when the data has one, else its position. */
    String id(int i) {
        String c = task.column("id");
        Row r = rows.get(i);
        return columns.contains(c) && !r.isNullAt(r.fieldIndex(c))
                ? String.valueOf((Object) r.getAs(c))
                : String.valueOf(i);
    }

    Object value(int i, String role) {
        Row r = rows.get(i);
        int f = r.fieldIndex(task.column(role));
        return r.isNullAt(f) ? null : r.get(f);
    }

    /** A text role's string, or null when the value is token ids (or null). */
    String text(int i, String role) {
        return value(i, role) instanceof String s ? s : null;
    }

    /**
     * A text role as token ids: given ids as they are, text through the tokenizer (special tokens such as BOS
     * added when addSpecial). Throws with the reason when neither works.
     */
    int[] tokens(Object v, String role, boolean addSpecial) {
        if (v == null) {
            throw new IllegalArgumentException(role + " is null");
        }
        if (v instanceof String s) {
            if (s.isEmpty()) {
                throw new IllegalArgumentException(role + " is empty");
            }
            if (tokenizer == null) {
                throw new IllegalArgumentException(role + " is text and this model has no tokenizer (give token ids)");
            }
            try {
                return tokenizer.encode(s, addSpecial);
            } catch (TokenizerException e) { // a text the tokenizer's rules cannot handle fails its row only
                throw new IllegalArgumentException(role + " cannot be tokenized: " + e.getMessage(), e);
            }
        }
        if (v instanceof scala.collection.Seq<?> seq) {
            int[] ids = new int[seq.size()];
            for (int k = 0; k < ids.length; k++) {
                ids[k] = ((Number) seq.apply(k)).intValue();
            }
            if (ids.length == 0) {
                throw new IllegalArgumentException(role + " is empty");
            }
            return ids;
        }
        throw new IllegalArgumentException(
                role + " is a " + v.getClass().getSimpleName() + "; expected text or token ids");
    }

    Tokenizer tokenizer() {
        return tokenizer;
    }
}
