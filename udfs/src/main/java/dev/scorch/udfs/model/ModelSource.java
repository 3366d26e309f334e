package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.Serializable;
import java.nio.file.Path;

/**
 * How an executor gets a checkpoint folder: shipped by the driver as broadcast blocks or as the job's files
 * (SparkContext.addFile), or read from a path every executor sees. Either way the files are checked against the
 * driver's manifest before use.
 */
public interface ModelSource extends Serializable {
    ModelManifest manifest();

    /** A local folder holding the verified checkpoint files; cacheRoot is this executor's model cache folder. */
    Path materialize(Path cacheRoot);

    /** "broadcast", "files" or "shared-path", for logs and summaries. */
    String mode();
}
