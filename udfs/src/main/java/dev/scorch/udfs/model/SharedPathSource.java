package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;

/**
 * The checkpoint lies at a path every executor sees. A local (or NFS) folder is mapped in place; any other
 * Hadoop FileSystem URI (hdfs://, s3a://, ...) is copied once into the executor's model cache. Files are
 * verified against the manifest (size and CRC32C) either way.
 */
public record SharedPathSource(String uri, ModelManifest manifest) implements ModelSource {

    @Override
    public String mode() {
        return "shared-path";
    }

    @Override
    public Path materialize(Path cacheRoot) {
        URI u = URI.create(uri);
        if (u.getScheme() == null || u.getScheme().equals("file")) {
            Path dir = u.getScheme() == null ? Path.of(uri) : Path.of(u);
            manifest.verify(dir);
            return dir;
        }
        return LocalModelFolder.assemble(cacheRoot, manifest, tmp -> {
            FileSystem fs = FileSystem.get(u, new Configuration());
            for (ModelManifest.FileEntry e : manifest.files()) {
                org.apache.hadoop.fs.Path src =
                        new org.apache.hadoop.fs.Path(uri.endsWith("/") ? uri + e.name() : uri + "/" + e.name());
                try (InputStream in = fs.open(src)) {
                    Files.copy(in, tmp.resolve(e.name()), StandardCopyOption.REPLACE_EXISTING);
                }
            }
        });
    }
}
