package dev.scorch.jobs;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.udfs.model.RemoteCheckpoint;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** {@code --model demo}: the built-in demo model (tiny preset, seed 0), made on first use into a cache folder and reused. */
public final class DemoModel {
    public static final String NAME = "demo";
    private static final String MARKER = ".scorch-demo-complete-v2"; // v2: ships a tokenizer

    private DemoModel() {}

    /** $SCORCH_HOME/models/demo-tiny, SCORCH_HOME defaulting to ~/.cache/scorch. */
    public static Path folder() {
        String home = System.getenv("SCORCH_HOME");
        Path root = home != null && !home.isEmpty()
                ? Path.of(home)
                : Path.of(System.getProperty("user.home"), ".cache", "scorch");
        return root.resolve("models").resolve("demo-tiny");
    }

    /** The model folder for a --model value: the demo model's folder (made if needed) or the path (or file: URI) given. */
    public static Path resolve(String model) {
        if (!model.equals(NAME)) {
            return RemoteCheckpoint.localPath(model); // a path, or a file: URI
        }
        Path dir = folder();
        if (!Files.isRegularFile(dir.resolve(MARKER))) {
            try {
                System.err.println("scorch: writing the built-in demo model (random weights) to " + dir);
                new DemoModelWriter(DemoPreset.TINY, false, true, 0).write(dir);
                Files.writeString(dir.resolve(MARKER), "tiny seed 0\n");
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write the demo model to " + dir, e);
            }
        }
        return dir;
    }
}
