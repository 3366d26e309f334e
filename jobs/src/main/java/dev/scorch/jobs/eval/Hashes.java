package dev.scorch.jobs.eval;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

/** SHA-256 content hashes of suites and data (a folder hashes its files' relative names and bytes, in name order). */
final class Hashes {
    private Hashes() {}

    static String sha256(byte[] bytes) {
        MessageDigest md = digest();
        md.update(bytes);
        return HexFormat.of().formatHex(md.digest());
    }

    static String sha256(Path path) {
        MessageDigest md = digest();
        try {
            List<Path> files;
            if (Files.isDirectory(path)) {
                try (Stream<Path> s = Files.walk(path)) {
                    files = s.filter(Files::isRegularFile)
                            .filter(p -> !p.getFileName().toString().startsWith("."))
                            .sorted()
                            .toList();
                }
            } else {
                files = List.of(path);
            }
            byte[] buf = new byte[1 << 16];
            for (Path f : files) {
                md.update(path.relativize(f).toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                try (InputStream in = Files.newInputStream(f)) {
                    for (int r; (r = in.read(buf)) > 0; ) {
                        md.update(buf, 0, r);
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(path + ": cannot hash: " + e.getMessage(), e);
        }
        return HexFormat.of().formatHex(md.digest());
    }

    private static MessageDigest digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
