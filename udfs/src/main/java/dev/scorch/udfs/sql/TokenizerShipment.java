package dev.scorch.udfs.sql;

import dev.scorch.engine.tokenizer.TokenizerException;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.io.IOException;
import java.io.OutputStream;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;

/**
 * A tokenizer's files as the driver ships them: each file's bytes in a Spark broadcast (tokenizers are a few
 * MB), and a content hash (SHA-256 over each file's name, length and bytes, in file order) that names the
 * executor's local copy and keys the per-JVM cache. Serialisable: the SQL functions carry it to the tasks.
 */
public final class TokenizerShipment implements Serializable {
    private static final long serialVersionUID = 1L;

    /** Marker written last into an executor's copy: a folder without it is incomplete and written again. */
    static final String COMPLETE = ".scorch-complete";

    /**
     * The files shipped, in this order: the tokenizer proper (the first of tokenizer.json, tokenizer.json.gz,
     * tiktoken.model that exists; that is the one {@code Tokenizers.load} reads), then whichever of the
     * others exist.
     */
    static final List<String> PRIMARY = Tokenizers.PRIMARY_FILES;

    static final List<String> EXTRA = Tokenizers.EXTRA_FILES;

    private final String contentHash;
    private final String origin;
    private final String[] names;
    private final List<Broadcast<byte[]>> files;

    private TokenizerShipment(String contentHash, String origin, String[] names, List<Broadcast<byte[]>> files) {
        this.contentHash = contentHash;
        this.origin = origin;
        this.names = names;
        this.files = files;
    }

    /** The tokenizer files of {@code dir}, read on the driver: name and bytes, in shipping order. */
    record DriverFiles(Path dir, List<String> names, List<byte[]> bytes, String contentHash) {}

    /**
     * Reads the tokenizer files of {@code dir}.
     *
     * @throws TokenizerException when the folder is missing, has no tokenizer file, or a file cannot be read
     */
    static DriverFiles read(Path dir) {
        if (!Files.isDirectory(dir)) {
            throw new TokenizerException(
                    dir + ": not a folder (expected a tokenizer folder with tokenizer.json or tiktoken.model)");
        }
        List<String> names = new ArrayList<>();
        for (String p : PRIMARY) {
            if (Files.isRegularFile(dir.resolve(p))) {
                names.add(p);
                break;
            }
        }
        if (names.isEmpty()) {
            throw new TokenizerException(
                    dir + ": no tokenizer in this folder (looked for " + String.join(", ", PRIMARY) + ")");
        }
        for (String p : EXTRA) {
            if (Files.isRegularFile(dir.resolve(p))) {
                names.add(p);
            }
        }
        List<byte[]> bytes = new ArrayList<>();
        for (String n : names) {
            try {
                bytes.add(Files.readAllBytes(dir.resolve(n)));
            } catch (IOException e) {
                throw new TokenizerException(dir.resolve(n) + ": cannot read: " + e.getMessage(), e);
            }
        }
        return new DriverFiles(dir, List.copyOf(names), bytes, hash(names, bytes));
    }

    /** SHA-256 (hex) over each file's UTF-8 name, a NUL, its length (8 bytes, big-endian) and its bytes. */
    static String hash(List<String> names, List<byte[]> bytes) {
        MessageDigest md;
        try {
            md = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        for (int i = 0; i < names.size(); i++) {
            md.update(names.get(i).getBytes(StandardCharsets.UTF_8));
            md.update((byte) 0);
            long n = bytes.get(i).length;
            for (int s = 56; s >= 0; s -= 8) {
                md.update((byte) (n >>> s));
            }
            md.update(bytes.get(i));
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /** Broadcasts the files read by {@link #read(Path)}. */
    static TokenizerShipment ship(JavaSparkContext sc, DriverFiles f) {
        List<Broadcast<byte[]>> b = new ArrayList<>(f.bytes().size());
        for (byte[] x : f.bytes()) {
            b.add(sc.broadcast(x));
        }
        return new TokenizerShipment(
                f.contentHash(), f.dir().toString(), f.names().toArray(String[]::new), b);
    }

    /** SHA-256 of the shipped files (hex, 64 characters). */
    public String contentHash() {
        return contentHash;
    }

    /** The driver-side folder the files came from (for messages). */
    public String origin() {
        return origin;
    }

    /** The shipped file names, tokenizer first. */
    public List<String> fileNames() {
        return List.of(names);
    }

    /**
     * This tokenizer's folder under {@code cacheRoot} ({@code tokenizers/<content hash>}), written from the
     * broadcast on first use: files go into a temporary folder that is renamed into place once complete, so a
     * concurrent task or another JVM on the same host never sees a partial folder.
     */
    Path materialize(Path cacheRoot) {
        Path parent = cacheRoot.resolve("tokenizers");
        Path dir = parent.resolve(contentHash);
        if (isComplete(dir)) {
            return dir;
        }
        Path tmp = null;
        try {
            Files.createDirectories(parent);
            tmp = Files.createTempDirectory(parent, contentHash.substring(0, 12) + ".partial-");
            for (int i = 0; i < names.length; i++) {
                try (OutputStream out = Files.newOutputStream(tmp.resolve(names[i]))) {
                    out.write(files.get(i).value());
                }
            }
            Files.writeString(tmp.resolve(COMPLETE), contentHash);
            try {
                Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
                tmp = null;
            } catch (java.nio.file.FileSystemException e) {
                // Another task or JVM published first (rename onto a non-empty folder fails); theirs is as good as
                // ours.
                if (!isComplete(dir)) {
                    throw e;
                }
            }
            return dir;
        } catch (IOException e) {
            throw new TokenizerException(dir + ": cannot write the broadcast tokenizer (from " + origin + "): " + e, e);
        } finally {
            if (tmp != null) {
                deleteQuietly(tmp);
            }
        }
    }

    private boolean isComplete(Path dir) {
        try {
            return Files.isRegularFile(dir.resolve(COMPLETE))
                    && Files.readString(dir.resolve(COMPLETE)).equals(contentHash);
        } catch (IOException e) {
            return false;
        }
    }

    private static void deleteQuietly(Path p) {
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        } catch (IOException ignored) {
            // a leftover *.partial-* folder is harmless
        }
    }

    /** Frees the broadcast blocks (the functions registered with this shipment stop working). */
    public void destroy() {
        files.forEach(Broadcast::destroy);
    }

    @Override
    public String toString() {
        return "tokenizer " + origin + " (" + String.join(", ", names) + "; sha256 " + contentHash.substring(0, 12)
                + ")";
    }
}
