package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.JobArtifactSet$;
import org.apache.spark.JobArtifactState;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkFiles;
import org.apache.spark.sql.SparkSession;
import scala.Option;

/**
 * The checkpoint's files were added to the job one by one with {@code SparkContext.addFile} (a non-local master
 * refuses a folder: UNSUPPORTED_ADD_FILE.LOCAL_DIRECTORY). SparkFiles keeps one flat folder per application, so each
 * file goes under a name no other model's file can take ({@link #shippedName}). An executor moves the fetched files
 * under their own names into its host's model cache, as broadcast weights are ({@link #materialize}), verifies them
 * against the manifest, and maps them there; the application's SparkFiles folder keeps no copy.
 *
 * @param artifactScope the artifact scope (session) of the driver's session the files were added in; null: Spark's default
 */
public record SparkFilesSource(ModelManifest manifest, String artifactScope) implements ModelSource {
    /** Prefix of the driver's staging folder in its SparkFiles folder. */
    static final String FOLDER_PREFIX = "scorch-model-";

    /** The SparkFiles name of file i of the manifest: content hash, index and file name (a shard may sit in a subfolder). */
    static String shippedName(ModelManifest m, int i) {
        return m.contentHash() + "-" + i + "-"
                + Path.of(m.files().get(i).name()).getFileName();
    }

    /**
     * Adds every file of the folder to the job's files on the driver, each through a link under its shipped name in a
     * staging folder inside the driver's SparkFiles folder (Spark deletes that folder when the application stops).
     */
    public static SparkFilesSource ship(SparkContext sc, Path dir, ModelManifest manifest) {
        Path staging = Path.of(SparkFiles.getRootDirectory())
                .toAbsolutePath()
                .resolve(FOLDER_PREFIX + manifest.contentHash() + ".shipped");
        Path src = dir.toAbsolutePath().normalize();
        List<Path> links = new ArrayList<>();
        try {
            Files.createDirectories(staging);
            for (int i = 0; i < manifest.files().size(); i++) {
                Path link = staging.resolve(shippedName(manifest, i));
                try {
                    Files.createSymbolicLink(
                            link, src.resolve(manifest.files().get(i).name()));
                } catch (FileAlreadyExistsException e) {
                    // Shipped before in this application (same content hash): Spark ignores a path it has already
                    // added.
                }
                links.add(link);
            }
        } catch (IOException e) {
            throw new CheckpointException(
                    src + ": cannot stage the model files for SparkContext.addFile in " + staging + ": "
                            + e.getMessage(),
                    e);
        }
        // As file: URIs: a plain path is resolved to its canonical form, the link's target, whose name would be
        // shipped.
        JobArtifactState scope = sessionScope();
        inScope(scope == null ? null : scope.uuid(), () -> {
            links.forEach(l -> sc.addFile(l.toUri().toString()));
            return null;
        });
        return new SparkFilesSource(manifest, scope == null ? null : scope.uuid());
    }

    /**
     * The artifact scope of the session active on this thread (null: none, Spark's default scope). A Spark 4 session with
     * isolated artifacts (the default) gives its SQL jobs' tasks only the files added in its scope, not those
     * SparkContext.addFile adds outside it (the executors would never fetch them), and executors keep them in a folder of
     * that scope.
     */
    private static JobArtifactState sessionScope() {
        Option<SparkSession> active = SparkSession.getActiveSession();
        SparkSession s = active.isDefined()
                ? active.get()
                : SparkSession.getDefaultSession().getOrElse(() -> null);
        return s instanceof org.apache.spark.sql.classic.SparkSession c
                ? c.artifactManager().state()
                : null;
    }

    /** Runs body with the artifact scope scopeId active on this thread (null: Spark's default scope). */
    private static <T> T inScope(String scopeId, java.util.function.Supplier<T> body) {
        if (scopeId == null) {
            return body.get();
        }
        return JobArtifactSet$.MODULE$.withActiveJobArtifactState(
                new JobArtifactState(scopeId, Option.empty()), body::get);
    }

    /** Where this executor's copy of file i is (SparkFiles resolves a name in the scope it was added in). */
    private Path fetched(int i) {
        return Path.of(inScope(artifactScope, () -> SparkFiles.get(shippedName(manifest, i))))
                .toAbsolutePath();
    }

    @Override
    public String mode() {
        return "files";
    }

    /**
     * The host's model cache copy ({@link LocalModelFolder#assemble}, as broadcast weights): the executor that assembles
     * it moves its fetched files in (a rename on the same file system), and every executor then deletes the copies Spark
     * fetched into its application folder. So a Worker keeps one copy of a model in its cache, reused by later
     * applications, not one per application and executor in folders that stay until the Worker's clean-up.
     */
    @Override
    public Path materialize(Path cacheRoot) {
        try {
            return LocalModelFolder.assemble(cacheRoot, manifest, tmp -> {
                for (int i = 0; i < manifest.files().size(); i++) {
                    Path from = fetched(i);
                    Path to =
                            LocalModelFolder.target(tmp, manifest.files().get(i).name());
                    if (ownCopy(from)) {
                        Files.move(from, to);
                    } else {
                        Files.copy(from, to);
                    }
                }
            });
        } finally {
            for (int i = 0; i < manifest.files().size(); i++) {
                Path from = fetched(i);
                try {
                    if (ownCopy(from)) {
                        Files.deleteIfExists(from);
                    }
                } catch (IOException e) {
                    // left for the Worker's clean-up of application folders
                }
            }
        }
    }

    /**
     * Whether p is a copy Spark fetched for this executor (a plain file, not a link that could lead to the driver's
     * folder), which may be moved or deleted.
     */
    private static boolean ownCopy(Path p) {
        return Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS);
    }
}
