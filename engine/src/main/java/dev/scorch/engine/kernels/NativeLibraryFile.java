package dev.scorch.engine.kernels;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The file the native library is loaded from (System.load needs one): the jar's bytes written once per content into a
 * folder of the user's, named by their SHA-256, and loaded from there by every later JVM, so a JVM that crashes leaves
 * no copy behind. A file is written under a temporary name and renamed into place (JVMs starting together never load
 * a partial one), and an existing one is used only when its bytes are the jar's. The folder must be the user's own and
 * closed to others' writes (a library anyone could swap would run as us); else {@code java.io.tmpdir/scorch-native-<user>}
 * is tried, and last a temporary file removed at exit, as before.
 */
final class NativeLibraryFile {
    /** The cache folder (default {@code $XDG_CACHE_HOME/scorch/native}, else {@code ~/.cache/scorch/native}). */
    static final String DIR_PROPERTY = "scorch.native.dir";

    /** The temporary copies versions before this one made (Files.createTempFile("scorch_cpu", ".so")). */
    private static final Pattern OLD_COPY = Pattern.compile("scorch_cpu\\d+\\.so");

    private static final Set<PosixFilePermission> OTHERS_WRITE =
            Set.of(PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_WRITE);

    private NativeLibraryFile() {}

    /** -Dscorch.native.dir, else the XDG cache folder. */
    static Path defaultDir() {
        String set = System.getProperty(DIR_PROPERTY);
        if (set != null && !set.isEmpty()) {
            return Path.of(set);
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        Path base = xdg != null && !xdg.isEmpty() && Path.of(xdg).isAbsolute()
                ? Path.of(xdg)
                : Path.of(System.getProperty("user.home"), ".cache");
        return base.resolve("scorch").resolve("native");
    }

    /** The file holding lib ({@code <prefix>-<16 hex digits of its SHA-256>.so}) in dir, or where dir cannot be used, elsewhere. */
    static Path cached(byte[] lib, Path dir, String prefix) throws IOException {
        String name = prefix + "-" + sha256(lib).substring(0, 16) + ".so";
        for (Path d : new Path[] {
            dir, Path.of(System.getProperty("java.io.tmpdir"), "scorch-native-" + System.getProperty("user.name"))
        }) {
            Path f = inPrivateDir(lib, d, name);
            if (f != null) {
                return f;
            }
        }
        Path f = Files.createTempFile(prefix, ".so");
        f.toFile().deleteOnExit();
        Files.write(f, lib);
        return f;
    }

    /** lib as dir/name, written there where it is not already; null where dir is not a folder only we can write. */
    private static Path inPrivateDir(byte[] lib, Path dir, String name) throws IOException {
        try {
            Files.createDirectories(
                    dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException e) {
            return null; // a file, or a link to nowhere
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
        PosixFileAttributes attrs = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (!attrs.isDirectory() || attrs.permissions().stream().anyMatch(OTHERS_WRITE::contains)) {
            return null;
        }
        if (!ours(dir, attrs.owner())) {
            return null; // someone else's folder, writable to us
        }
        Path target = dir.resolve(name);
        if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS)
                && Files.size(target) == lib.length
                && Arrays.equals(lib, Files.readAllBytes(target))) {
            return target;
        }
        Path part = Files.createTempFile(dir, name + ".", ".partial");
        try {
            Files.write(part, lib);
            Files.move(part, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return target;
        } finally {
            Files.deleteIfExists(part);
        }
    }

    /** Whether owner (of dir) is this process's user: the owner of a file it makes. */
    private static boolean ours(Path dir, UserPrincipal owner) {
        try {
            Path probe = Files.createTempFile(dir, ".owner", ".probe");
            try {
                return Files.getOwner(probe).equals(owner);
            } finally {
                Files.deleteIfExists(probe);
            }
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * Removes the copies earlier versions made in dir (one per JVM, left behind where a JVM crashed) that belong to
     * owner; returns how many. A JVM still running from one keeps its mapping: on Linux a loaded library survives removal.
     */
    static int removeOldTempCopies(Path dir, UserPrincipal owner) throws IOException {
        int removed = 0;
        try (DirectoryStream<Path> s = Files.newDirectoryStream(dir, "scorch_cpu*.so")) {
            for (Path p : s) {
                if (OLD_COPY.matcher(p.getFileName().toString()).matches()
                        && Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)
                        && owner.equals(Files.getOwner(p, LinkOption.NOFOLLOW_LINKS))
                        && Files.deleteIfExists(p)) {
                    removed++;
                }
            }
        }
        return removed;
    }

    private static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
