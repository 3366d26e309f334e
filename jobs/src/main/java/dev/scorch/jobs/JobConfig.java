package dev.scorch.jobs;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;

/**
 * A job config file from conf/: {@code key = value} lines, # comments. Keys starting with {@code spark.}
 * are Spark settings; keys starting with {@code scorch.} are defaults for the job's options (e.g.
 * {@code scorch.max-batch-tokens = 4096}); command-line options win over both.
 */
public record JobConfig(Map<String, String> spark, Map<String, String> scorch) {

    public static JobConfig empty() {
        return new JobConfig(Map.of(), Map.of());
    }

    public static JobConfig read(Path file) {
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(file)) {
            p.load(r);
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": cannot read job config: " + e.getMessage(), e);
        }
        Map<String, String> spark = new TreeMap<>();
        Map<String, String> scorch = new TreeMap<>();
        for (String k : p.stringPropertyNames()) {
            String v = p.getProperty(k).trim();
            if (k.startsWith("spark.")) {
                spark.put(k, v);
            } else if (k.startsWith("scorch.")) {
                scorch.put(k.substring("scorch.".length()), v);
            } else {
                throw new IllegalArgumentException(
                        file + ": key '" + k + "' is neither a spark.* setting nor a scorch.* option");
            }
        }
        return new JobConfig(spark, scorch);
    }

    public String option(String name, String fallback) {
        return scorch.getOrDefault(name, fallback);
    }
}
