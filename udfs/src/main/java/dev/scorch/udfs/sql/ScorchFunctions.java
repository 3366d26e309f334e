package dev.scorch.udfs.sql;

import dev.scorch.engine.tokenizer.TokenizerException;
import java.nio.file.Path;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;

/**
 * Tokenizer functions for Spark SQL and the DataFrame API ({@code functions.call_function(name, col)},
 * {@code functions.expr(...)}), registered as temporary functions of one session:
 *
 * <ul>
 *   <li>{@code scorch_tokenize(text STRING) -> ARRAY<INT>}: token ids with the special tokens the tokenizer
 *       config adds (BOS for DeepSeek-V3, as {@code tokenizer(text)} in Python);
 *   <li>{@code scorch_tokenize_raw(text STRING) -> ARRAY<INT>}: token ids without added special tokens
 *       ({@code add_special_tokens=False}); use it on {@code scorch_chat} output, which already holds BOS;
 *   <li>{@code scorch_detokenize(ids ARRAY<INT>) -> STRING}: the text of the ids, special tokens skipped
 *       (ARRAY&lt;BIGINT&gt; is accepted too);
 *   <li>{@code scorch_num_tokens(text STRING) -> INT}: {@code size(scorch_tokenize(text))}, special tokens
 *       included;
 *   <li>{@code scorch_chat(messages ARRAY<STRUCT<role STRING, content STRING>>) -> STRING}: the chat
 *       template rendered with {@code add_generation_prompt=True} (extra struct fields, e.g. tool_calls, are
 *       passed to the template; ARRAY&lt;MAP&lt;STRING, STRING&gt;&gt; works too).
 * </ul>
 *
 * <p>Spark registers one Java UDF per name and arity, so there is no two-argument
 * {@code scorch_tokenize(text, add_special_tokens)}: the two forms have two names. Arguments are not cast:
 * pass STRING where a text is expected. A null argument gives null; a row that cannot be computed (a chat
 * template that calls raise_exception, an id outside the vocabulary, a null message) fails the query with
 * a message that starts with the function's name.
 *
 * <p>The driver reads the tokenizer files at registration, loads them once to check them, and broadcasts
 * their bytes; each executor JVM writes them once into its cache folder and loads the tokenizer once, for
 * all tasks ({@link ExecutorTokenizerCache}).
 */
public final class ScorchFunctions {
    public static final String TOKENIZE = "scorch_tokenize";
    public static final String TOKENIZE_RAW = "scorch_tokenize_raw";
    public static final String DETOKENIZE = "scorch_detokenize";
    public static final String NUM_TOKENS = "scorch_num_tokens";
    public static final String CHAT = "scorch_chat";

    /** Every function {@link #register} defines. */
    public static final List<String> NAMES = List.of(TOKENIZE, TOKENIZE_RAW, DETOKENIZE, NUM_TOKENS, CHAT);

    private ScorchFunctions() {}

    /** {@link #register(SparkSession, Path)} with a local path string. */
    public static TokenizerShipment register(SparkSession spark, String tokenizerDir) {
        return register(spark, dev.scorch.udfs.model.RemoteCheckpoint.localPath(tokenizerDir));
    }

    /**
     * Registers the tokenizer functions of the tokenizer in {@code tokenizerDir} (a model folder or a folder
     * with only the tokenizer files: tokenizer.json, tokenizer.json.gz or tiktoken.model, and
     * tokenizer_config.json, special_tokens_map.json, chat_template.jinja where present) on {@code spark},
     * replacing functions of the same names. The folder is read on the driver.
     *
     * @return what was shipped: its content hash, and {@link TokenizerShipment#destroy()} to free the
     *     broadcast when the functions are no longer needed
     * @throws TokenizerException when the folder has no tokenizer or a tokenizer file cannot be read or parsed;
     *     the message names the folder or file
     */
    public static TokenizerShipment register(SparkSession spark, Path tokenizerDir) {
        Path dir = tokenizerDir.toAbsolutePath().normalize();
        TokenizerShipment.DriverFiles files = TokenizerShipment.read(dir);
        try {
            ExecutorTokenizerCache.preload(files.contentHash(), dir);
        } catch (RuntimeException e) {
            throw new TokenizerException(dir + ": cannot load the tokenizer: " + e.getMessage(), e);
        }
        TokenizerShipment s = TokenizerShipment.ship(JavaSparkContext.fromSparkContext(spark.sparkContext()), files);
        var udf = spark.udf();
        udf.register(
                TOKENIZE,
                new TokenizerUdfs.Tokenize(TOKENIZE, s, true),
                DataTypes.createArrayType(DataTypes.IntegerType, false));
        udf.register(
                TOKENIZE_RAW,
                new TokenizerUdfs.Tokenize(TOKENIZE_RAW, s, false),
                DataTypes.createArrayType(DataTypes.IntegerType, false));
        udf.register(DETOKENIZE, new TokenizerUdfs.Detokenize(DETOKENIZE, s), DataTypes.StringType);
        udf.register(NUM_TOKENS, new TokenizerUdfs.NumTokens(NUM_TOKENS, s), DataTypes.IntegerType);
        udf.register(CHAT, new TokenizerUdfs.Chat(CHAT, s), DataTypes.StringType);
        return s;
    }
}
