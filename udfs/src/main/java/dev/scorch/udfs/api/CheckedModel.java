package dev.scorch.udfs.api;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.model.ModelInfo;
import java.nio.file.Path;

/**
 * A checkpoint folder checked on the driver, before anything is shipped: its validation passed, and its manifest (every
 * file's size and CRC32C, the content hash executors verify and cache by) is made. {@link ScorchModel#load} does this
 * and then ships the weights; the jobs call {@link #of} first and ship only once their output and input are checked.
 *
 * @param dir        the folder as given
 * @param info       its config, storage and validation
 * @param manifest   the files a model load reads, each with its size and CRC32C
 */
public record CheckedModel(Path dir, ModelInfo info, ModelManifest manifest) {

    /** Validates the folder (throws naming the first problem) and makes its manifest: reads every file once. */
    public static CheckedModel of(Path dir) {
        ModelInfo info = ModelInfo.of(dir);
        info.validation().orThrow();
        ModelManifest manifest = ModelManifest.of(dir);
        return new CheckedModel(dir, info, manifest);
    }

    /** generation_config.json (EOS ids, sampling defaults), or the model config's; read when generating only. */
    public GenerationConfig generationConfig() {
        return GenerationConfig.forModel(dir, info.config());
    }

    /** name@hash, written in every result row's model column. */
    public String label() {
        return manifest.name() + "@" + manifest.shortHash();
    }
}
