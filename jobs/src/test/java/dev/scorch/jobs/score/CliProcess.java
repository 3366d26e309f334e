package dev.scorch.jobs.score;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** `scorch` run in a JVM of its own on local[2], as a user's shell starts it: so that it can race or be killed. */
final class CliProcess {
    private CliProcess() {}

    /** Starts `scorch ARGS --master local[2] ...`, its output going to log; Spark's scratch space goes under scratch. */
    static Process start(Path log, Path scratch, List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(SparkTests.jvmFlags());
        cmd.addAll(List.of("-Xmx1g", "-cp", SparkTests.classPath(), "dev.scorch.jobs.ScorchCli"));
        cmd.addAll(args);
        cmd.addAll(List.of(
                "--master",
                "local[2]",
                "--spark-conf",
                "spark.ui.enabled=false",
                "--spark-conf",
                "spark.driver.host=127.0.0.1",
                "--spark-conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--spark-conf",
                "spark.sql.shuffle.partitions=2",
                // a killed JVM cannot clean up its scratch space: keep it in the test's temporary folder
                "--spark-conf",
                "spark.local.dir=" + scratch));
        return new ProcessBuilder(cmd)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .start();
    }

    /** The end of a log, for a failure message. */
    static String tail(Path log) {
        try {
            String s = Files.readString(log);
            return s.length() > 6000 ? s.substring(s.length() - 6000) : s;
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }
}
