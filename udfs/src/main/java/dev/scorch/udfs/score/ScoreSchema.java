package dev.scorch.udfs.score;

import dev.scorch.engine.scoring.LogitsMode;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Column names of the normalised input the partition function reads, and the output schema it writes.
 *
 * <p>Output: id (the input's type), num_tokens, token_ids, token_logprobs (first token and prompt tokens
 * null), sum_logprob, mean_logprob, perplexity, [top_logprobs], [logits], error, model, source_row.
 */
public final class ScoreSchema {
    public static final String ID = "id";
    public static final String TOKEN_IDS = "token_ids";
    public static final String PROMPT = "prompt";
    public static final String CONTINUATION = "continuation";
    /** Where a row came from: FILE:ROW, its file below the input folder and its place in that file (0-based). */
    public static final String SOURCE = "_source";
    /** Why a row cannot run, found while reading it (a malformed record, token_ids not an array of integers); null if none. */
    public static final String INPUT_ERROR = "_input_error";
    /**
     * Where a token_ids row's scored tokens start (the continuation's first; its log-probs and those after it count, as
     * a prompt and continuation's do); null scores every token after the first.
     */
    public static final String SCORE_FROM = "_score_from";
    /**
     * Where a prefix the row shares with other rows ends (a few-shot prompt's examples), 0 or null if none: only
     * shared-prefix scoring reads it.
     */
    public static final String SHARED_PREFIX = "_shared_prefix";
    /** The output column that carries the input row's SOURCE: unique per input row, what --resume keys on. */
    public static final String SOURCE_ROW = "source_row";

    public static final StructType TOP_ENTRY =
            new StructType().add("token_id", DataTypes.IntegerType, false).add("logprob", DataTypes.FloatType, false);

    private ScoreSchema() {}

    /** The input schema after normalisation on the driver. */
    public static StructType input(DataType idType) {
        return new StructType()
                .add(ID, idType, true)
                .add(TOKEN_IDS, new ArrayType(DataTypes.LongType, true), true)
                .add(PROMPT, DataTypes.StringType, true)
                .add(CONTINUATION, DataTypes.StringType, true)
                .add(INPUT_ERROR, DataTypes.StringType, true)
                .add(SOURCE, DataTypes.StringType, true)
                .add(SCORE_FROM, DataTypes.IntegerType, true)
                .add(SHARED_PREFIX, DataTypes.IntegerType, true);
    }

    public static StructType output(DataType idType, ScoreOptions o) {
        StructType s = new StructType()
                .add(ID, idType, true)
                .add("num_tokens", DataTypes.IntegerType, true)
                .add("token_ids", new ArrayType(DataTypes.IntegerType, false), true)
                .add("token_logprobs", new ArrayType(DataTypes.FloatType, true), true)
                .add("sum_logprob", DataTypes.DoubleType, true)
                .add("mean_logprob", DataTypes.DoubleType, true)
                .add("perplexity", DataTypes.DoubleType, true);
        if (o.topK() > 0) {
            s = s.add("top_logprobs", new ArrayType(new ArrayType(TOP_ENTRY, false), true), true);
        }
        if (o.logits() != LogitsMode.NONE) {
            s = s.add("logits", new ArrayType(new ArrayType(DataTypes.FloatType, false), false), true);
        }
        return s.add("error", DataTypes.StringType, true)
                .add("model", DataTypes.StringType, false)
                .add(SOURCE_ROW, DataTypes.StringType, false);
    }

    static int indexOf(StructType s, String name) {
        return s.fieldIndex(name);
    }

    static StructField field(StructType s, String name) {
        return s.apply(name);
    }
}
