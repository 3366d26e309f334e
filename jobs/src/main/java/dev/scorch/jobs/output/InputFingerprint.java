package dev.scorch.jobs.output;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.IOException;
import java.io.InputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * What a run read: every input file (the glob or folder expanded as Spark expands it, hidden names skipped) with its
 * size, modification time and a SHA-256 of its content — all of it for a file up to {@value #WHOLE_BYTES} bytes, else
 * its first and last {@value #EDGE_BYTES} bytes. A resume compares the run's fingerprint with the input it is given.
 *
 * <p>It catches a file added, removed, renamed, grown, shrunk or rewritten (its modification time moves), and any edit
 * of a small file or of a large file's ends even with the time put back. It does not catch an edit inside a large file
 * that keeps its size and whose modification time was set back by hand. Its cost is one listing and at most
 * 2 × {@value #EDGE_BYTES} bytes read per file: on a terabyte input of 10,000 part files, 1.3 GB read by the driver.
 */
public record InputFingerprint(List<FileMark> files) {
    static final long WHOLE_BYTES = 8L << 20;
    static final int EDGE_BYTES = 64 << 10;

    /** One input file. */
    public record FileMark(String path, long size, long modified, String sha256) {}

    public InputFingerprint {
        files = List.copyOf(files);
    }

    /** Reads the fingerprint of an input path (a file, a folder or a glob) on fs. */
    public static InputFingerprint of(FileSystem fs, String input) throws IOException {
        FileStatus[] matched = fs.globStatus(new Path(input));
        List<FileMark> marks = new ArrayList<>();
        if (matched != null) {
            for (FileStatus s : matched) {
                collect(fs, s, marks);
            }
        }
        marks.sort(java.util.Comparator.comparing(FileMark::path));
        return new InputFingerprint(marks);
    }

    private static void collect(FileSystem fs, FileStatus s, List<FileMark> out) throws IOException {
        String name = s.getPath().getName();
        if (name.startsWith("_") || name.startsWith(".")) {
            return; // what Spark's file sources skip
        }
        if (s.isDirectory()) {
            for (FileStatus c : fs.listStatus(s.getPath())) {
                collect(fs, c, out);
            }
            return;
        }
        out.add(new FileMark(s.getPath().toString(), s.getLen(), s.getModificationTime(), digest(fs, s)));
    }

    private static String digest(FileSystem fs, FileStatus s) throws IOException {
        if (FileKinds.isLocal(fs)
                && !java.nio.file.Files.isRegularFile(
                        java.nio.file.Path.of(s.getPath().toUri()))) {
            // A FIFO or a device would block or never end the read.
            throw new IllegalArgumentException("--input: " + s.getPath()
                    + " is a device, FIFO or socket, not a file; Scorch reads only regular files");
        }
        MessageDigest md = sha256();
        try (FSDataInputStream in = fs.open(s.getPath())) {
            if (s.getLen() <= WHOLE_BYTES) {
                update(md, in, s.getLen());
            } else {
                update(md, in, EDGE_BYTES);
                in.seek(s.getLen() - EDGE_BYTES);
                update(md, in, EDGE_BYTES);
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    private static void update(MessageDigest md, InputStream in, long n) throws IOException {
        byte[] buf = new byte[64 << 10];
        while (n > 0) {
            int r = in.read(buf, 0, (int) Math.min(buf.length, n));
            if (r < 0) {
                throw new IOException("the input file shrank while it was read");
            }
            md.update(buf, 0, r);
            n -= r;
        }
    }

    /** The differences from another fingerprint, a phrase each (empty: the same input). */
    public List<String> changesFrom(InputFingerprint before) {
        Map<String, FileMark> old = new LinkedHashMap<>();
        before.files.forEach(f -> old.put(f.path(), f));
        List<String> changes = new ArrayList<>();
        for (FileMark f : files) {
            FileMark o = old.remove(f.path());
            if (o == null) {
                changes.add(f.path() + " is new");
            } else if (o.size() != f.size()) {
                changes.add(f.path() + " changed size (" + o.size() + " → " + f.size() + " bytes)");
            } else if (!o.sha256().equals(f.sha256())) {
                changes.add(f.path() + " changed content");
            } else if (o.modified() != f.modified() && f.size() > WHOLE_BYTES) {
                // a small file's whole content is compared: only a large one's time stands for its middle
                changes.add(f.path() + " was modified (" + Instant.ofEpochMilli(o.modified()) + " → "
                        + Instant.ofEpochMilli(f.modified()) + ")");
            }
        }
        old.keySet().forEach(p -> changes.add(p + " is gone"));
        return changes;
    }

    public ArrayNode toJson(ObjectMapper json) {
        ArrayNode a = json.createArrayNode();
        for (FileMark f : files) {
            a.add(json.createObjectNode()
                    .put("path", f.path())
                    .put("size", f.size())
                    .put("modified", f.modified())
                    .put("sha256", f.sha256()));
        }
        return a;
    }

    public static InputFingerprint fromJson(JsonNode a) {
        List<FileMark> marks = new ArrayList<>();
        for (JsonNode f : a) {
            marks.add(new FileMark(
                    f.path("path").asText(),
                    f.path("size").asLong(),
                    f.path("modified").asLong(),
                    f.path("sha256").asText()));
        }
        return new InputFingerprint(marks);
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
