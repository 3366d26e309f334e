package dev.scorch.jobs.output;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Refuses an output path that would put a user's own files at risk: one that is, contains or lies inside an input or
 * the model folder, or that is or contains the root, the home folder or the working folder. Paths are compared after
 * "." and ".." are resolved and, on the local file system, after symbolic links are followed, so {@code x/sub/..} or a
 * link to the input is seen for what it is.
 */
public final class PathGuard {
    /** A path as a file system (scheme and authority) and its names from the root. */
    record Canon(String fs, List<String> names) {
        boolean within(Canon other) {
            return fs.equals(other.fs)
                    && names.size() >= other.names.size()
                    && names.subList(0, other.names.size()).equals(other.names);
        }

        @Override
        public String toString() {
            return fs + "/" + String.join("/", names);
        }
    }

    private record Kept(String what, Canon path) {}

    private final FileSystem fs;
    private final List<Kept> inputs = new ArrayList<>();
    private final List<Kept> places = new ArrayList<>();

    /** A guard for outputs on fs, keeping its root, its home and working folders and this JVM's (the user's) home and working folders. */
    public PathGuard(FileSystem fs) {
        this(
                fs,
                java.nio.file.Path.of(System.getProperty("user.home")),
                java.nio.file.Path.of(System.getProperty("user.dir")));
    }

    PathGuard(FileSystem fs, java.nio.file.Path home, java.nio.file.Path workingFolder) {
        this.fs = fs;
        places.add(new Kept("the home folder", local(home)));
        places.add(new Kept("the working folder", local(workingFolder)));
        places.add(new Kept("the file system's home folder", canon(fs.getHomeDirectory())));
        places.add(new Kept("the file system's working folder", canon(fs.getWorkingDirectory())));
    }

    /** Keeps an input path (a file, a folder or a glob: a glob keeps the folder its pattern starts in). */
    public PathGuard input(String what, String path) {
        inputs.add(new Kept(what + " " + path, canon(globFree(new Path(path)))));
        return this;
    }

    /** Keeps a local folder or file (the model folder, an eval suite). */
    public PathGuard input(String what, java.nio.file.Path path) {
        inputs.add(new Kept(what + " " + path, local(path)));
        return this;
    }

    /** Throws, saying why, when writing or replacing output could touch a kept path. */
    public void check(String option, String output) {
        Canon out = canon(new Path(output));
        if (out.names().isEmpty()) {
            throw refuse(option, output, "is the root of " + out.fs());
        }
        for (Kept k : inputs) {
            if (out.equals(k.path())) {
                throw refuse(option, output, "is " + k.what());
            }
            if (k.path().within(out)) {
                throw refuse(option, output, "contains " + k.what());
            }
            if (out.within(k.path())) {
                throw refuse(option, output, "lies inside " + k.what());
            }
        }
        for (Kept k : places) {
            if (k.path().within(out)) {
                throw refuse(
                        option,
                        output,
                        (out.equals(k.path()) ? "is " : "contains ") + k.what() + " (" + k.path() + ")");
            }
        }
    }

    private static IllegalArgumentException refuse(String option, String output, String why) {
        return new IllegalArgumentException(
                option + " " + output + " " + why + "; Scorch never writes there: choose another output");
    }

    /** The path up to its first name with a glob character. */
    public static Path globFree(Path p) {
        List<String> names = new ArrayList<>();
        for (Path q = p; q != null && !q.getName().isEmpty(); q = q.getParent()) {
            names.add(0, q.getName());
        }
        Path base = p;
        while (base.getParent() != null && !base.getName().isEmpty()) {
            base = base.getParent();
        }
        for (String n : names) {
            if (n.matches(".*[*?\\[\\]{}].*")) {
                break;
            }
            base = new Path(base, n);
        }
        return base;
    }

    Canon canon(Path p) {
        URI uri = fs.makeQualified(p).toUri();
        if ("file".equals(uri.getScheme())) {
            return local(java.nio.file.Path.of(uri));
        }
        return new Canon(
                uri.getScheme() + "://" + (uri.getAuthority() == null ? "" : uri.getAuthority()),
                names(URI.create(uri.getPath()).normalize().getPath()));
    }

    /** A local path with "." and ".." resolved and the links of its existing part followed. */
    static Canon local(java.nio.file.Path p) {
        java.nio.file.Path abs = p.toAbsolutePath().normalize();
        java.nio.file.Path existing = abs;
        while (existing != null && !Files.exists(existing)) {
            existing = existing.getParent();
        }
        java.nio.file.Path real = abs;
        if (existing != null) {
            try {
                real = existing.toRealPath().resolve(existing.relativize(abs)).normalize();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot resolve " + existing, e);
            }
        }
        return new Canon("file://", names(real.toString()));
    }

    private static List<String> names(String path) {
        List<String> out = new ArrayList<>();
        for (String n : path.split("/")) {
            if (!n.isEmpty()) {
                out.add(n);
            }
        }
        return out;
    }
}
