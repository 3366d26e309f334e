package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.ModelManifest;
import java.nio.file.Path;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkFiles;

/**
 * The checkpoint folder was added to the job with {@code SparkContext.addFile(dir, recursive = true)}: Spark
 * copies it to every executor's SparkFiles root, where it is verified against the manifest and mapped.
 */
public record SparkFilesSource(String folderName, ModelManifest manifest) implements ModelSource {

  /** Adds the folder to the job's files on the driver. */
  public static SparkFilesSource ship(SparkContext sc, Path dir, ModelManifest manifest) {
    sc.addFile(dir.toAbsolutePath().toString(), true);
    return new SparkFilesSource(dir.toAbsolutePath().normalize().getFileName().toString(), manifest);
  }

  @Override
  public String mode() {
    return "files";
  }

  @Override
  public Path materialize(Path cacheRoot) {
    Path dir = Path.of(SparkFiles.get(folderName));
    manifest.verify(dir);
    return dir;
  }
}
