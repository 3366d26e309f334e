package dev.scorch.engine.tokenizer;

import dev.scorch.engine.checkpoint.ModelFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** Finds and loads the tokenizer of a model folder. */
public final class Tokenizers {
    private Tokenizers() {}

    /** The tokenizer proper, in the order {@link #load} looks for it: the first of these a folder holds is read. */
    public static final List<String> PRIMARY_FILES = List.of("tokenizer.json", "tokenizer.json.gz", "tiktoken.model");

    /** The files beside it: read by {@link #load} where present (special_tokens_map.json only by Hugging Face tools). */
    public static final List<String> EXTRA_FILES =
            List.of("tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja");

    /**
     * The tokenizer of {@code modelDir}: tokenizer.json (Hugging Face, also accepted gzipped as
     * tokenizer.json.gz) or else tiktoken.model (Kimi K2), each with tokenizer_config.json when present. The
     * chat template comes from tokenizer_config.json, else from a chat_template.jinja file. Empty when the
     * folder has no tokenizer file.
     *
     * @throws TokenizerException when a file cannot be read or parsed, or is a symbolic link out of the folder; the
     *     message names the file and field
     */
    public static Optional<Tokenizer> load(Path modelDir) {
        for (String name : ModelFiles.TOKENIZER) { // never read, nor quote, a file a link brings in from elsewhere
            String problem = ModelFiles.outsideFolder(modelDir, modelDir.resolve(name));
            if (problem != null) {
                throw new TokenizerException(problem);
            }
        }
        return loadVerified(modelDir);
    }

    /**
     * {@link #load} without the check for links out of the folder: for an executor's copy of a checkpoint, whose every
     * file was checked against the driver's manifest and which may be links to the files Spark fetched.
     */
    public static Optional<Tokenizer> loadVerified(Path modelDir) {
        Path config = modelDir.resolve("tokenizer_config.json");
        Path hf = modelDir.resolve("tokenizer.json");
        Path hfGz = modelDir.resolve("tokenizer.json.gz");
        Path tiktoken = modelDir.resolve("tiktoken.model");
        Path hfFile = Files.isRegularFile(hf) ? hf : Files.isRegularFile(hfGz) ? hfGz : null;
        if (hfFile == null && !Files.isRegularFile(tiktoken)) {
            return Optional.empty();
        }
        TokenizerConfig cfg = Files.isRegularFile(config) ? TokenizerConfig.read(config) : TokenizerConfig.empty();
        Path jinja = modelDir.resolve("chat_template.jinja");
        if (cfg.chatTemplate() == null && Files.isRegularFile(jinja)) {
            try {
                String template = Files.readString(jinja, StandardCharsets.UTF_8);
                cfg = new TokenizerConfig(
                        cfg.source(),
                        cfg.addBosToken(),
                        cfg.addEosToken(),
                        cfg.bosToken(),
                        cfg.eosToken(),
                        template,
                        cfg.addedTokens());
            } catch (IOException e) {
                throw new TokenizerException(jinja + ": cannot read: " + e, e);
            }
        }
        if (hfFile != null) {
            return Optional.of(HfTokenizer.build(hfFile.toString(), HfTokenizer.readFile(hfFile), cfg));
        }
        byte[] model;
        try {
            model = Files.readAllBytes(tiktoken);
        } catch (IOException e) {
            throw new TokenizerException(tiktoken + ": cannot read: " + e, e);
        }
        return Optional.of(new TiktokenTokenizer(tiktoken.toString(), model, cfg, TiktokenTokenizer.KIMI_PATTERN));
    }

    /**
     * How large an id a tokenizer holding {@code tokens} tokens may use: id tables are arrays of the largest
     * id + 1, so a file saying 2,000,000,000 must not make them. Twice the count, or 65,536 more, leaves room
     * for the gaps real files have (reserved ranges, ids padded to a multiple of 64 or 128).
     */
    static int idBound(int tokens) {
        return (int) Math.min(Integer.MAX_VALUE - 8L, Math.max(2L * tokens, tokens + 65_536L));
    }
}
