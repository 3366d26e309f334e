package dev.scorch.engine.config;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** generation_config.json: special ids and the checkpoint's default sampling settings (null when unset). */
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
    return new GenerationConfig(
        f.nullableInt("bos_token_id"),
        List.copyOf(f.intOrIntList("eos_token_id")),
        f.optBool("do_sample", false),
        f.nullableDouble("temperature"),
        f.nullableDouble("top_p"),
        f.nullableInt("top_k"),
        f.nullableInt("max_new_tokens"));
  }
}
