package dev.scorch.engine.checkpoint;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * A Hugging Face checkpoint folder's weights: one {@code model.safetensors}, or shards listed by
 * {@code model.safetensors.index.json} (followed as written: shard names differ between checkpoints).
 * Pickle files are refused.
 */
public final class Checkpoint {
    public static final String INDEX = "model.safetensors.index.json";
    public static final String SINGLE = "model.safetensors";

    private final Path dir;
    private final List<SafetensorsFile> shards;
    private final Map<String, SafetensorsFile> byTensor;

    private Checkpoint(Path dir, List<SafetensorsFile> shards, Map<String, SafetensorsFile> byTensor) {
        this.dir = dir;
        this.shards = shards;
        this.byTensor = byTensor;
    }

    public static Checkpoint open(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new CheckpointException(dir + ": model folder does not exist");
        }
        Path index = dir.resolve(INDEX);
        if (Files.isRegularFile(index)) {
            return openIndexed(dir, index);
        }
        List<Path> files = list(dir, ".safetensors");
        if (files.isEmpty()) {
            List<Path> pickles = new ArrayList<>();
            for (String ext : new String[] {".bin", ".pt", ".pth", ".ckpt"}) {
                pickles.addAll(list(dir, ext));
            }
            if (!pickles.isEmpty()) {
                throw new CheckpointException(
                        pickles.get(0) + ": pickle checkpoints are refused (they can run code when loaded); "
                                + "convert the model to safetensors first");
            }
            throw new CheckpointException(dir + ": no " + INDEX + ", " + SINGLE + " or *.safetensors file");
        }
        List<SafetensorsFile> shards = new ArrayList<>();
        Map<String, SafetensorsFile> byTensor = new LinkedHashMap<>();
        for (Path f : files) {
            SafetensorsFile sf = SafetensorsFile.open(f);
            shards.add(sf);
            for (String name : sf.tensors().keySet()) {
                SafetensorsFile prev = byTensor.put(name, sf);
                if (prev != null) {
                    throw new CheckpointException(f + ": tensor '" + name + "' is also in " + prev.path());
                }
            }
        }
        return new Checkpoint(dir, List.copyOf(shards), Collections.unmodifiableMap(byTensor));
    }

    private static Checkpoint openIndexed(Path dir, Path index) {
        JsonNode root;
        try {
            root = new ObjectMapper().readTree(index.toFile());
        } catch (IOException e) {
            throw new CheckpointException(index + ": " + dev.scorch.engine.config.JsonErrors.describe(e));
        }
        JsonNode map = root == null ? null : root.get("weight_map");
        if (map == null || !map.isObject()) {
            throw new CheckpointException(index + ": field 'weight_map' is missing or not an object");
        }
        Path base = dir.toAbsolutePath().normalize();
        Map<String, SafetensorsFile> opened = new TreeMap<>();
        Map<String, SafetensorsFile> byTensor = new LinkedHashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = map.fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            String tensor = e.getKey();
            if (!e.getValue().isTextual()) {
                throw new CheckpointException(index + ": weight_map entry for '" + tensor + "' is not a file name");
            }
            String shardName = e.getValue().asText();
            SafetensorsFile sf = opened.get(shardName);
            if (sf == null) {
                Path shard = base.resolve(shardName).normalize();
                if (shardName.isEmpty()
                        || Path.of(shardName).isAbsolute()
                        || !shard.startsWith(base)
                        || shard.equals(base)) {
                    throw new CheckpointException(index + ": shard '" + shardName + "' for tensor '" + tensor
                            + "' points outside the model folder");
                }
                if (!Files.isRegularFile(shard)) {
                    throw new CheckpointException(
                            index + ": shard '" + shardName + "' named for tensor '" + tensor + "' is missing");
                }
                sf = SafetensorsFile.open(shard);
                opened.put(shardName, sf);
            }
            if (!sf.tensors().containsKey(tensor)) {
                throw new CheckpointException(
                        sf.path() + ": tensor '" + tensor + "' is named in " + INDEX + " but not in this shard");
            }
            byTensor.put(tensor, sf);
        }
        return new Checkpoint(dir, List.copyOf(opened.values()), Collections.unmodifiableMap(byTensor));
    }

    private static List<Path> list(Path dir, String ext) {
        try (Stream<Path> s = Files.list(dir)) {
            return s.filter(p -> p.getFileName().toString().endsWith(ext) && Files.isRegularFile(p))
                    .sorted()
                    .toList();
        } catch (IOException e) {
            throw new CheckpointException(dir + ": cannot list: " + e.getMessage(), e);
        }
    }

    public Path dir() {
        return dir;
    }

    public List<SafetensorsFile> shards() {
        return shards;
    }

    /** Tensor names in index order. */
    public Iterable<String> names() {
        return byTensor.keySet();
    }

    /** The tensors the index (or the shards' headers) names. */
    public int tensorCount() {
        return byTensor.size();
    }

    public boolean has(String name) {
        return byTensor.containsKey(name);
    }

    public TensorInfo info(String name) {
        SafetensorsFile sf = byTensor.get(name);
        if (sf == null) {
            throw new CheckpointException(dir + ": no tensor '" + name + "'");
        }
        return sf.tensors().get(name);
    }

    public Tensor tensor(String name) {
        SafetensorsFile sf = byTensor.get(name);
        if (sf == null) {
            throw new CheckpointException(dir + ": no tensor '" + name + "'");
        }
        return sf.tensor(name);
    }

    /**
     * Throws a {@link CheckpointException} naming the first mapped shard that has shrunk since it was mapped (truncated or
     * rewritten in place): reading its weights would fault. One fstat per mapped shard, allocating nothing.
     */
    public void checkMapped() {
        for (int i = 0; i < shards.size(); i++) {
            MappedFile m = shards.get(i).mappedOrNull();
            if (m != null && m.shrunk()) {
                throw m.changedOnDisk("its mapped weights can no longer be read", null);
            }
        }
    }

    /**
     * What a read of the mapped weights that faulted means (the JVM's InternalError for a Java read of a mapping): where a
     * shard has shrunk since it was mapped, a {@link CheckpointException} naming it; else the fault as it came.
     */
    public RuntimeException readFault(InternalError fault) {
        for (SafetensorsFile sf : shards) {
            MappedFile m = sf.mappedOrNull();
            if (m != null && m.shrunk()) {
                return m.changedOnDisk("a read of the model's weights faulted", fault);
            }
        }
        throw fault;
    }

    public long bytesOnDisk() {
        long n = 0;
        for (SafetensorsFile sf : shards) {
            try {
                n += Files.size(sf.path());
            } catch (IOException e) {
                throw new CheckpointException(sf.path() + ": " + e.getMessage(), e);
            }
        }
        return n;
    }
}
