package dev.scorch.udfs.model;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;

/**
 * The driver ships every file of the checkpoint as Spark broadcast blocks of {@link #CHUNK} bytes (far
 * under Spark's 2 GiB block limit); each executor fetches them once, writes them into its host's model cache
 * folder ({@link ModelCache}), verifies them against the manifest, and memory-maps them from there. The driver's block
 * store holds the whole checkpoint meanwhile, so a model over the broadcast limit is refused ({@link WeightsDelivery}).
 */
public final class BroadcastSource implements ModelSource {
    public static final int CHUNK = 32 << 20;

    private final ModelManifest manifest;
    private final List<List<Broadcast<byte[]>>> chunks; // per manifest file, its chunks in order

    private BroadcastSource(ModelManifest manifest, List<List<Broadcast<byte[]>>> chunks) {
        this.manifest = manifest;
        this.chunks = chunks;
    }

    /**
     * Reads the folder's files on the driver and broadcasts them chunk by chunk; refuses, before reading anything, a
     * model larger than {@value WeightsDelivery#BROADCAST_MAX_CONF}.
     */
    public static BroadcastSource ship(JavaSparkContext sc, Path dir, ModelManifest manifest) {
        WeightsDelivery.checkBroadcast(manifest, WeightsDelivery.broadcastMax(sc.getConf()));
        List<List<Broadcast<byte[]>>> all = new ArrayList<>();
        for (ModelManifest.FileEntry e : manifest.files()) {
            List<Broadcast<byte[]>> fileChunks = new ArrayList<>();
            try (InputStream in = Files.newInputStream(dir.resolve(e.name()))) {
                for (long off = 0; off < e.size(); off += CHUNK) {
                    byte[] b = in.readNBytes((int) Math.min(CHUNK, e.size() - off));
                    fileChunks.add(sc.broadcast(b));
                }
            } catch (IOException ex) {
                throw new CheckpointException(
                        dir.resolve(e.name()) + ": cannot read for broadcast: " + ex.getMessage(), ex);
            }
            all.add(fileChunks);
        }
        return new BroadcastSource(manifest, all);
    }

    @Override
    public ModelManifest manifest() {
        return manifest;
    }

    @Override
    public String mode() {
        return "broadcast";
    }

    @Override
    public Path materialize(Path cacheRoot) {
        return LocalModelFolder.assemble(cacheRoot, manifest, tmp -> {
            for (int i = 0; i < manifest.files().size(); i++) {
                try (OutputStream out = Files.newOutputStream(
                        LocalModelFolder.target(tmp, manifest.files().get(i).name()))) {
                    for (Broadcast<byte[]> c : chunks.get(i)) {
                        out.write(c.value());
                    }
                }
            }
        });
    }

    /** Frees the broadcast blocks on the driver and executors once the job is done. */
    public void destroy() {
        chunks.forEach(l -> l.forEach(b -> b.destroy()));
    }
}
