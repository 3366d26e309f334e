package dev.scorch.udfs.api;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.config.GenerationConfig;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.udfs.model.RemoteCheckpoint;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;

/**
 * A checkpoint folder checked on the driver, before anything is shipped: its validation passed, and its manifest (every
 * file's size and CRC32C, the content hash executors verify and cache by) is made. {@link ScorchModel#load} does this
 * and then ships the weights; the jobs call {@link #of} first and ship only once their output and input are checked.
 *
 * @param dir        the folder as given, or a remote folder's local stand-in ({@link RemoteCheckpoint}: its
 *                   configuration and tokenizer files, and shards that hold only their headers)
 * @param info       its config, storage and validation
 * @param manifest   the files a model load reads, each with its size and CRC32C
 * @param location   where executors find the files: dir's absolute path, or the remote folder's URI
 */
public record CheckedModel(Path dir, ModelInfo info, ModelManifest manifest, String location) {

    /** Validates the folder (throws naming the first problem) and makes its manifest: reads every file once. */
    public static CheckedModel of(Path dir) {
        ModelInfo info = ModelInfo.of(dir);
        info.validation().orThrow();
        ModelManifest manifest = ModelManifest.of(dir);
        return new CheckedModel(dir, info, manifest, dir.toAbsolutePath().toString());
    }

    /**
     * A local folder (a path or a file: URI) as {@link #of(Path)}, or a folder on another Hadoop file system (hdfs://, s3a://; conf reaches
     * it): validated from its configuration files and shard headers, staged under the driver's temporary folder.
     */
    public static CheckedModel of(String location, Configuration conf) {
        if (!RemoteCheckpoint.isRemote(location)) {
            return of(RemoteCheckpoint.localPath(location));
        }
        RemoteCheckpoint.Staged staged = RemoteCheckpoint.stage(
                location, conf, Path.of(System.getProperty("java.io.tmpdir"), "scorch-remote-models"));
        ModelInfo info = ModelInfo.of(staged.dir());
        info.validation().orThrow();
        return new CheckedModel(staged.dir(), info, staged.manifest(), location);
    }

    /** Whether the folder lies on another file system: executors copy it from {@link #location}, never from dir. */
    public boolean remote() {
        return RemoteCheckpoint.isRemote(location);
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
