package dev.scorch.engine.testing;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs a main class of the test class path in a JVM of its own, with this JVM's module and -XX flags: for what could
 * crash a JVM (a test that fails must not take the whole test fork down) or needs a fresh one.
 */
public final class ChildJvm {
    private ChildJvm() {}

    /** How a child ended: its exit status (134 where it aborted on a signal) and what it wrote to stdout and stderr. */
    public record Result(int exitCode, String output) {}

    /**
     * Runs mainClass with args; jvmArgs come after this JVM's flags (a -D there wins). env: variables to set, a null value
     * removes one. Kills the child and fails past limitSeconds.
     */
    public static Result run(
            Class<?> mainClass, List<String> jvmArgs, Map<String, String> env, long limitSeconds, String... args)
            throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (a.startsWith("--add-") || a.startsWith("-XX:") || a.startsWith("--enable-native-access")) {
                cmd.add(a);
            }
        }
        cmd.add("-Xmx512m");
        cmd.addAll(jvmArgs);
        cmd.add("-cp");
        cmd.add(System.getProperty("surefire.test.class.path", System.getProperty("java.class.path")));
        cmd.add(mainClass.getName());
        cmd.addAll(List.of(args));
        Path log = Files.createTempFile("scorch-child-jvm", ".log");
        try {
            ProcessBuilder pb =
                    new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
            env.forEach((k, v) -> {
                if (v == null) {
                    pb.environment().remove(k);
                } else {
                    pb.environment().put(k, v);
                }
            });
            Process p = pb.start();
            if (!p.waitFor(limitSeconds, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor();
                throw new AssertionError(
                        mainClass.getSimpleName() + " ran past " + limitSeconds + " s:\n" + Files.readString(log));
            }
            return new Result(p.exitValue(), Files.readString(log, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(log);
        }
    }
}
