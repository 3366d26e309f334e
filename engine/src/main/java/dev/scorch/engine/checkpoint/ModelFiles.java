package dev.scorch.engine.checkpoint;

import java.util.List;

/**
 * The files of a checkpoint folder that a model load reads beside the shards, by name: the one list the
 * {@link ModelManifest} ships, verifies and hashes, so a copy made from the manifest (broadcast, SparkFiles) loads as
 * the folder does and a change to any of them is another model. Read by: config.json ({@code ModelConfig}),
 * generation_config.json ({@code GenerationConfig}), the index ({@link Checkpoint}), and the tokenizer's files
 * ({@code Tokenizers.load}: tokenizer.json, or tokenizer.json.gz, or tiktoken.model; tokenizer_config.json; and
 * chat_template.jinja, the chat template where tokenizer_config.json has none; special_tokens_map.json is shipped for
 * Hugging Face tools).
 */
public final class ModelFiles {
    public static final String CONFIG = "config.json";
    public static final String GENERATION_CONFIG = "generation_config.json";

    /**
     * Every file a tokenizer of the folder is built from, where present: Tokenizers.PRIMARY_FILES and EXTRA_FILES, in the
     * manifest's order (fixed: the model's content hash is taken over the files in this order).
     */
    public static final List<String> TOKENIZER = List.of(
            "tokenizer.json",
            "tokenizer.json.gz",
            "tiktoken.model",
            "tokenizer_config.json",
            "chat_template.jinja",
            "special_tokens_map.json");

    /** Every file besides the shards, in the manifest's order. */
    public static final List<String> METADATA = List.of(
            CONFIG,
            GENERATION_CONFIG,
            Checkpoint.INDEX,
            TOKENIZER.get(0),
            TOKENIZER.get(1),
            TOKENIZER.get(2),
            TOKENIZER.get(3),
            TOKENIZER.get(4),
            TOKENIZER.get(5));

    private ModelFiles() {}
}
