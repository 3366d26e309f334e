package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.TensorInfo;
import dev.scorch.engine.checkpoint.ValidationReport;
import dev.scorch.engine.config.ModelConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** What {@code scorch inspect} reports about a checkpoint folder: shape of the model, sizes, dtypes, validation. */
public record ModelInfo(
    Path dir,
    ModelConfig config,
    long parameters,
    long activeParameters,
    Map<DType, Long> parametersByDtype,
    long bytesOnDisk,
    int shards,
    int denseLayers,
    int moeLayers,
    String tokenizer,
    ValidationReport validation) {

  /** Tokenizer files a checkpoint folder may ship, in the order Scorch prefers them. */
  public static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tiktoken.model");

  public static ModelInfo of(Path dir) {
    ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
    Checkpoint ckpt = Checkpoint.open(dir);
    ValidationReport report = CheckpointValidator.validate(config, ckpt);
    Map<DType, Long> byDtype = new TreeMap<>();
    // The layout is listed only where the checkpoint can hold it (the validator's first check).
    for (WeightLayout.Spec s : WeightLayout.count(config) > ckpt.tensorCount() ? List.<WeightLayout.Spec>of() : WeightLayout.of(config)) {
      if (ckpt.has(s.name())) {
        TensorInfo t = ckpt.info(s.name());
        byDtype.merge(t.dtype(), t.numel(), Long::sum);
      }
    }
    int moe = 0;
    for (int i = 0; i < config.numHiddenLayers(); i++) {
      moe += config.isMoeLayer(i) ? 1 : 0;
    }
    String tokenizer = TOKENIZER_FILES.stream().filter(f -> Files.isRegularFile(dir.resolve(f))).findFirst().orElse(null);
    return new ModelInfo(dir, config, WeightLayout.parameters(config), WeightLayout.activeParameters(config), byDtype,
        ckpt.bytesOnDisk(), ckpt.shards().size(), config.numHiddenLayers() - moe, moe, tokenizer, report);
  }

  /** The dtype holding most parameters ("BF16", "F8_E4M3", ...). */
  public String mainDtype() {
    return parametersByDtype.entrySet().stream().max(Map.Entry.comparingByValue()).map(e -> e.getKey().headerName()).orElse("none");
  }
}
