package dev.scorch.engine.testing;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/** Tiny demo checkpoints written once per test JVM into a temporary folder (removed at exit). */
public final class DemoModels {
    private static final Map<String, Path> MADE = new ConcurrentHashMap<>();
    private static Path root;

    private DemoModels() {}

    public static Path tinyBf16() {
        return make("tiny-bf16", false, true);
    }

    public static Path tinyFp8() {
        return make("tiny-fp8", true, true);
    }

    public static Path tinyNoQLora() {
        return make("tiny-noqlora", false, false);
    }

    /** Kimi-K2-Thinking-style: routed experts in compressed-tensors INT4 groups of 32, the rest BF16. */
    public static Path tinyInt4() {
        return make("tiny-int4", DemoModelWriter.Weights.INT4, true, false);
    }

    /** {@link #tinyInt4} wrapped as Kimi K2.5 (text_config, language_model. weights, a vision tower to ignore). */
    public static Path tinyInt4K25() {
        return make("tiny-int4-k25", DemoModelWriter.Weights.INT4, true, true);
    }

    /** compressed-tensors FP8 blocks (float-quantized, weight_scale). */
    public static Path tinyFp8Ct() {
        return make("tiny-fp8-ct", DemoModelWriter.Weights.FP8_CT, true, false);
    }

    private static Path make(String name, boolean fp8, boolean qLora) {
        return make(name, fp8 ? DemoModelWriter.Weights.FP8 : DemoModelWriter.Weights.BF16, qLora, false);
    }

    private static synchronized Path make(
            String name, DemoModelWriter.Weights weights, boolean qLora, boolean wrapK25) {
        return MADE.computeIfAbsent(name, n -> {
            try {
                if (root == null) {
                    root = Files.createTempDirectory("scorch-demo-models");
                    Runtime.getRuntime().addShutdownHook(new Thread(DemoModels::deleteRoot));
                }
                Path dir = root.resolve(n);
                new DemoModelWriter(DemoPreset.TINY, weights, qLora, wrapK25, 1234).write(dir);
                return dir;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    private static void deleteRoot() {
        try (Stream<Path> s = Files.walk(root)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // best effort at JVM exit
        }
    }
}
