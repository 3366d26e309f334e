package dev.scorch.jobs;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.spark.network.util.JavaUtils;
import org.junit.jupiter.api.Test;

/** The job configs in conf/ (what docs/deploy.md tells users to start from) read, with values the jobs accept. */
class ConfFilesTest {
    static List<Path> confFiles() throws IOException {
        try (Stream<Path> s = Files.list(Path.of("..", "conf"))) {
            return s.filter(p -> p.toString().endsWith(".conf")).sorted().toList();
        }
    }

    @Test
    void everyConfReadsWithValuesTheJobsAccept() throws IOException {
        List<Path> files = confFiles();
        assertTrue(
                files.stream()
                        .map(p -> p.getFileName().toString())
                        .toList()
                        .containsAll(
                                List.of("local.conf", "gpu-cluster.conf", "standalone.conf", "yarn.conf", "k8s.conf")),
                files.toString());
        for (Path f : files) {
            JobConfig c = JobConfig.read(f);
            String weights = c.option("weights", "broadcast");
            assertTrue(
                    Set.of("auto", "broadcast", "shared-path", "files").contains(weights),
                    f + ": scorch.weights " + weights);
            String dir = c.spark().get("spark.scorch.modelCache.dir");
            assertTrue(
                    dir == null || Path.of(dir).isAbsolute(),
                    f + ": spark.scorch.modelCache.dir must be absolute: " + dir);
            String age = c.spark().get("spark.scorch.modelCache.maxUnusedAge");
            assertTrue(age == null || JavaUtils.timeStringAsSec(age) >= 0, f + ": " + age);
            // Scorch's executor flags are set by the CLI; a conf that sets the key replaces them (and the cluster's
            // own).
            assertFalse(
                    c.spark().containsKey("spark.executor.extraJavaOptions")
                            && !c.spark()
                                    .get("spark.executor.extraJavaOptions")
                                    .contains("-XX:+UseCountedLoopSafepoints"),
                    f + ": spark.executor.extraJavaOptions without Scorch's flags");
        }
    }
}
