package dev.scorch.udfs.generate;

import dev.scorch.udfs.score.ScoreSchema;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The generate job's extra input columns (after id, token_ids and prompt: chat messages and per-row sampling
 * overrides, null where the input has none) and its output schema.
 *
 * <p>Output, one row per input row and sample: id, sample, completion, completion_token_ids, finish_reason
 * (stop | length | eos | error), num_prompt_tokens, num_completion_tokens, [token_logprobs], [top_logprobs],
 * error, model, source_row.
 */
public final class GenerateSchema {
    public static final String MESSAGES = "messages";
    public static final StructType MESSAGE =
            new StructType().add("role", DataTypes.StringType, true).add("content", DataTypes.StringType, true);

    /** Per-row overrides of the job's sampling settings, by input column name, in input order. */
    public enum RowParam {
        MAX_NEW_TOKENS("max_new_tokens", DataTypes.IntegerType),
        TEMPERATURE("temperature", DataTypes.DoubleType),
        TOP_K("top_k", DataTypes.IntegerType),
        TOP_P("top_p", DataTypes.DoubleType),
        MIN_P("min_p", DataTypes.DoubleType),
        REPETITION_PENALTY("repetition_penalty", DataTypes.DoubleType),
        PRESENCE_PENALTY("presence_penalty", DataTypes.DoubleType),
        FREQUENCY_PENALTY("frequency_penalty", DataTypes.DoubleType),
        SEED("seed", DataTypes.LongType),
        STOP("stop", new ArrayType(DataTypes.StringType, true));

        public final String column;
        public final DataType type;

        RowParam(String column, DataType type) {
            this.column = column;
            this.type = type;
        }
    }

    private GenerateSchema() {}

    public static StructType output(DataType idType, GenerateOptions o) {
        StructType s = new StructType()
                .add(ScoreSchema.ID, idType, true)
                .add("sample", DataTypes.IntegerType, false)
                .add("completion", DataTypes.StringType, true)
                .add("completion_token_ids", new ArrayType(DataTypes.IntegerType, false), true)
                .add("finish_reason", DataTypes.StringType, false)
                .add("num_prompt_tokens", DataTypes.IntegerType, true)
                .add("num_completion_tokens", DataTypes.IntegerType, true);
        if (o.logprobs()) {
            s = s.add("token_logprobs", new ArrayType(DataTypes.FloatType, false), true);
        }
        if (o.topLogprobs() > 0) {
            s = s.add("top_logprobs", new ArrayType(new ArrayType(ScoreSchema.TOP_ENTRY, false), false), true);
        }
        return s.add("error", DataTypes.StringType, true)
                .add("model", DataTypes.StringType, false)
                .add(ScoreSchema.SOURCE_ROW, DataTypes.StringType, false);
    }
}
