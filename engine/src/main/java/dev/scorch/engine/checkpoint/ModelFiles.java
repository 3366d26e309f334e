package dev.scorch.engine.checkpoint;

import java.io.IOException;
import java.nio.file.Path;
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

    /**
     * Null when file, followed through any symbolic links, lies inside dir (or, for a Hugging Face hub cache's
     * snapshots/REV folder, in the blobs/ folder beside it, where its links point); else the refusal, naming the file.
     * A link out of the folder (to /etc/passwd, say) is refused before anything reads it, so no error can quote it.
     */
    public static String outsideFolder(Path dir, Path file) {
        Path real;
        Path root;
        try {
            real = file.toRealPath();
            root = dir.toRealPath();
        } catch (IOException e) {
            return null; // missing or unreadable: the reader says so
        }
        if (real.startsWith(root)) {
            return null;
        }
        Path snapshots = root.getParent();
        if (snapshots != null
                && snapshots.getFileName() != null
                && snapshots.getFileName().toString().equals("snapshots")
                && snapshots.getParent() != null
                && real.startsWith(snapshots.getParent().resolve("blobs"))) {
            return null;
        }
        return file + ": a symbolic link to a file outside the model folder; refused (copy the file into the folder)";
    }

    /**
     * Refuses (naming the file) a configuration, index, tokenizer or shard file of dir that is a symbolic link out of
     * it: the driver's check before anything reads them. Executors load copies checked against its manifest.
     */
    public static void requireNoLinksOut(Path dir) {
        for (String name : METADATA) {
            requireInside(dir, dir.resolve(name));
        }
        try (var files = java.nio.file.Files.newDirectoryStream(dir, "*.safetensors")) {
            for (Path f : files) {
                requireInside(dir, f);
            }
        } catch (IOException e) {
            // an unreadable folder: the checkpoint's own reading says so
        }
    }

    /** Throws {@link CheckpointException} when {@link #outsideFolder} refuses the file. */
    public static void requireInside(Path dir, Path file) {
        String problem = outsideFolder(dir, file);
        if (problem != null) {
            throw new CheckpointException(problem);
        }
    }
}
