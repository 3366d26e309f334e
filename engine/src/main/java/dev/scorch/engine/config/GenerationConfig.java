package dev.scorch.engine.config;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** generation_config.json: special ids and the checkpoint's default sampling settings (null when unset), range-checked. */
public record GenerationConfig(
        Integer bosTokenId,
        List<Integer> eosTokenIds,
        boolean doSample,
        Double temperature,
        Double topP,
        Integer topK,
        Integer maxNewTokens) {

    public static GenerationConfig read(Path file) {
        return parse(JsonFields.read(file));
    }

    /** The folder's generation_config.json, or defaults taken from config.json when the file is absent. */
    public static GenerationConfig forModel(Path modelDir, ModelConfig model) {
        Path file = modelDir.resolve("generation_config.json");
        if (Files.isRegularFile(file)) {
            return read(file);
        }
        return new GenerationConfig(model.bosTokenId(), model.eosTokenIds(), false, null, null, null, null);
    }

    static GenerationConfig parse(JsonFields f) {
        List<Integer> eos = f.intOrIntList("eos_token_id");
        for (int id : eos) {
            f.checkInt("eos_token_id", id, 0, Integer.MAX_VALUE);
        }
        return new GenerationConfig(
                f.has("bos_token_id") ? f.intIn("bos_token_id", 0, Integer.MAX_VALUE) : null,
                List.copyOf(eos),
                f.optBool("do_sample", false),
                f.has("temperature") ? f.doubleIn("temperature", 0, Double.MAX_VALUE) : null,
                f.has("top_p") ? f.doubleIn("top_p", 0, 1) : null,
                f.has("top_k") ? f.intIn("top_k", 0, Integer.MAX_VALUE) : null,
                f.has("max_new_tokens") ? f.intIn("max_new_tokens", 1, Integer.MAX_VALUE) : null);
    }
}
