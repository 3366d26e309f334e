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

  private static synchronized Path make(String name, boolean fp8, boolean qLora) {
    return MADE.computeIfAbsent(name, n -> {
      try {
        if (root == null) {
          root = Files.createTempDirectory("scorch-demo-models");
          Runtime.getRuntime().addShutdownHook(new Thread(DemoModels::deleteRoot));
        }
        Path dir = root.resolve(n);
        new DemoModelWriter(DemoPreset.TINY, fp8, qLora, 1234).write(dir);
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
