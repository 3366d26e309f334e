package dev.scorch.udfs.pipeline;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A test's failure injection, from the Spark local property {@value #PROPERTY} (set on the driver thread that runs the
 * job; tasks receive it): "STAGE:NTH:MODE:FILE" makes pipeline stage STAGE fail after its first batch in the NTH
 * (0, 1, ...) barrier stage it runs in this JVM under this setting (a score job's slices run one barrier stage
 * each). MODE once: only the first time, FILE (created atomically) marking that it has; always: in every attempt;
 * exit: the stage's JVM halts at once, as if killed, the first time (FILE marks it). Unset in real runs.
 */
final class TestFailure {
    static final String PROPERTY = "spark.scorch.pipeline.testFailure";

    /** Spark stage ids each setting's stage has run in, in order. */
    private static final Map<String, List<Integer>> SEEN = new ConcurrentHashMap<>();

    private TestFailure() {}

    /** What to run after each batch of stage index in Spark stage stageId: nothing unless the setting names it. */
    static Runnable of(String spec, int index, int stageId) {
        if (spec == null || spec.isEmpty()) {
            return () -> {};
        }
        String[] p = spec.split(":", 4);
        if (p.length != 4 || !p[2].matches("once|always|exit")) {
            throw new IllegalArgumentException(PROPERTY + " '" + spec + "': expected STAGE:NTH:once|always|exit:FILE");
        }
        if (Integer.parseInt(p[0]) != index) {
            return () -> {};
        }
        List<Integer> seen = SEEN.computeIfAbsent(spec, k -> new ArrayList<>());
        int nth;
        synchronized (seen) {
            if (!seen.contains(stageId)) {
                seen.add(stageId);
            }
            nth = seen.indexOf(stageId);
        }
        if (nth != Integer.parseInt(p[1])) {
            return () -> {};
        }
        String mode = p[2];
        Path marker = Path.of(p[3]);
        return () -> {
            if (!mode.equals("always")) {
                try {
                    Files.createFile(marker);
                } catch (FileAlreadyExistsException e) {
                    return; // failed once already
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
            if (mode.equals("exit")) {
                Runtime.getRuntime().halt(137);
            }
            throw new IllegalStateException(
                    "pipeline stage " + index + " fails after its first batch, as " + PROPERTY + " asks (a test)");
        };
    }
}
