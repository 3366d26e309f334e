package dev.scorch.jobs.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.cluster.DriverRest.Stage;
import dev.scorch.jobs.cluster.DriverRest.Task;
import dev.scorch.jobs.score.SparkTests;
import dev.scorch.udfs.score.TestOnlyHold;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructField;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;

/**
 * The score and generate jobs on a real standalone cluster under faults: a Master and two Workers (one core, one 1 GiB
 * executor each) as JVMs of their own, jobs submitted through SparkSubmit with the shaded jobs jar (and once through
 * bin/scorch --master spark://), faults injected while the scoring stage runs. Every run must write every input row
 * exactly once, each bit for bit as a local[2] run of the same input in this JVM wrote it.
 *
 * <p>Faults land at fixed points whatever the machine's speed: a fault run holds the first attempts of the last two
 * partitions ({@link Hold}, udfs' TestOnlyHold). Once both are held, one on each executor (one core each), the other
 * six tasks are done; the test then kills or freezes the executor it picks, and releases the held tasks.
 *
 * <p>Run with bin/test-cluster (mvn -Pcluster: after package, since it submits the shaded jar). Figures (rows, fault,
 * wall time against the clean run) go to target/cluster-test/report.md and stdout; logs of every JVM under
 * target/cluster-test/logs and the Workers' folders.
 */
@Tag("cluster")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@Timeout(value = 8, unit = TimeUnit.MINUTES)
class StandaloneClusterFaultTest {
    static final int ROWS = 2000;
    static final int PARTITIONS = 8;
    static final Duration RUN_LIMIT = Duration.ofMinutes(5);

    static Path dir;
    static Path jobsTarget;
    static Path jobsJar;
    static Path model;
    static Path input;
    static Path generateInput;
    static Path cacheDir;
    static String contentHash;
    static List<String> flags;
    static StandaloneCluster cluster;
    static Map<String, String> localScores;
    static Map<String, String> localGenerated;
    static double cleanSeconds = Double.NaN;
    static final List<String> report = new ArrayList<>();
    static long suiteStart;

    @BeforeAll
    static void setUp() throws Exception {
        suiteStart = System.nanoTime();
        jobsTarget = Path.of(System.getProperty("scorch.jobs.target", "target"))
                .toAbsolutePath()
                .normalize();
        jobsJar = jobsTarget.resolve("scorch-jobs.jar");
        assertTrue(
                Files.isRegularFile(jobsJar),
                jobsJar + " is missing: run bin/test-cluster (mvn -Pcluster verify packages it first)");
        dir = jobsTarget.resolve("cluster-test");
        deleteTree(dir);
        Files.createDirectories(dir);
        cacheDir = dir.resolve("model-cache");
        flags = SparkTests.jvmFlags();

        model = dir.resolve("demo-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 0).write(model); // the --model demo checkpoint
        contentHash = ModelManifest.of(model).contentHash();
        List<String> lines = new ArrayList<>();
        Random r = new Random(24);
        for (int i = 0; i < ROWS; i++) {
            StringBuilder b = new StringBuilder("{\"id\":\"r" + i + "\",\"token_ids\":[");
            int n = 6 + r.nextInt(20);
            for (int k = 0; k < n; k++) {
                b.append(k == 0 ? "" : ",").append(1 + r.nextInt(DemoPreset.TINY.vocabSize() - 1));
            }
            lines.add(b.append("]}").toString());
        }
        input = SparkTests.writeJsonl(dir.resolve("in/rows.jsonl"), lines);
        // The generate job's input: the same rows, but every fourth a chat (rendered with the model's chat template by
        // jinjava on the executors, which takes commons-lang3 from the cluster: the shaded jar leaves it out) and every
        // fourth a text prompt (tokenised on the executors).
        List<String> prompts = new ArrayList<>();
        for (int i = 0; i < ROWS; i++) {
            prompts.add(
                    switch (i % 4) {
                        case 0 ->
                            "{\"id\":\"r" + i + "\",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me about row "
                                    + i + ".\"}]}";
                        case 1 -> "{\"id\":\"r" + i + "\",\"prompt\":\"Row " + i + " says\"}";
                        default -> lines.get(i);
                    });
        }
        generateInput = SparkTests.writeJsonl(dir.resolve("in-generate/rows.jsonl"), prompts);

        long t0 = System.nanoTime();
        cluster = StandaloneCluster.start(dir, jobsTarget, flags, 2, 1, "1536m"); // boots while the references run

        long t1 = System.nanoTime();
        SparkTests.spark(); // the CLI runs in this session (and leaves it up to read the outputs with)
        assertEquals(0, ScorchCli.run("score", argsArray(args(dir.resolve("local-score"), "--master", "local[2]"))));
        localScores = rows(dir.resolve("local-score"));
        assertEquals(0, ScorchCli.run("generate", generateArgs(dir.resolve("local-generate"), "--master", "local[2]")));
        localGenerated = rows(dir.resolve("local-generate"));
        for (String out : List.of("local-score", "local-generate")) {
            assertEquals(
                    0,
                    SparkTests.spark()
                            .read()
                            .parquet(dir.resolve(out).toString())
                            .where("error IS NOT NULL")
                            .count(),
                    out + " has error rows: the comparison would compare errors");
        }
        report.add(String.format(
                "local[2] references (score + generate, in the test JVM): %.1f s", (System.nanoTime() - t1) / 1e9));

        cluster.awaitReady();
        report.add(String.format(
                "cluster up (Master + 2 Workers, started before the references): %.1f s",
                (System.nanoTime() - t0) / 1e9));
    }

    @AfterAll
    static void tearDown() throws IOException {
        if (cluster != null) {
            cluster.close();
        }
        report.add(String.format(
                "whole suite in this JVM (set-up, runs, tear-down): %.1f s; load average at the end: %s",
                (System.nanoTime() - suiteStart) / 1e9, loadAverage()));
        report.add("");
        report.addAll(table());
        String text = String.join("\n", report) + "\n";
        System.out.println("\n=== cluster fault runs ===\n" + text);
        if (dir != null && Files.isDirectory(dir)) {
            Files.writeString(dir.resolve("report.md"), text);
        }
    }

    static List<String> args(Path out, String... more) {
        List<String> a = new ArrayList<>(List.of(
                "--model",
                model.toString(),
                "--input",
                input.toString(),
                "--output",
                out.toString(),
                "--partitions",
                String.valueOf(PARTITIONS),
                "--overwrite"));
        a.addAll(List.of(more));
        return a;
    }

    static String[] argsArray(List<String> a) {
        return a.toArray(String[]::new);
    }

    static String[] generateArgs(Path out, String... more) {
        List<String> a = args(out, more);
        a.set(a.indexOf("--input") + 1, generateInput.toString());
        a.addAll(List.of("--max-new-tokens", "4", "--temperature", "0.8", "--seed", "11"));
        return argsArray(a);
    }

    /** The settings every cluster run gets: loopback, 1 GiB executors with Scorch's JVM flags, the model cache under dir. */
    static List<String> clusterConf(int uiPort) {
        return List.of(
                "spark.ui.port=" + uiPort,
                "spark.driver.host=127.0.0.1",
                "spark.driver.bindAddress=127.0.0.1",
                "spark.executor.memory=1g",
                "spark.executor.cores=1",
                "spark.ui.showConsoleProgress=false",
                "spark.scorch.modelCache.dir=" + cacheDir);
    }

    /** A job in its own driver JVM, with the driver's REST API to watch it. */
    static final class Run {
        final String name;
        final Process process;
        final DriverRest rest;
        final long t0 = System.nanoTime();
        final Path out;
        final Path log;
        double wallSeconds;
        /** The machine's 5-minute load average when the run ended (other work on the machine slows every run). */
        String loadAverage = "?";
        /** When the fault was injected (epoch milliseconds; 0: none). */
        long injectedAt;
        /** The stage attempts and task attempts seen last while the driver ran. */
        List<Stage> stages = List.of();

        Map<String, List<Task>> tasks = new TreeMap<>();

        Run(String name, Process process, int uiPort, Path out, Path log) {
            this.name = name;
            this.process = process;
            this.rest = new DriverRest(uiPort);
            this.out = out;
            this.log = log;
        }

        String appId() {
            return rest.appId()
                    .orElseThrow(() -> new AssertionError(name + ": the driver's UI never answered; see " + log));
        }

        /** Records what the driver reports now (stages and their tasks). */
        void snapshot() {
            List<Stage> s = rest.stages();
            if (!s.isEmpty()) {
                stages = s;
                for (Stage st : s) {
                    List<Task> t = rest.tasks(st);
                    if (!t.isEmpty()) {
                        tasks.put(st.stageId() + "." + st.attemptId(), t);
                    }
                }
            }
        }

        /** The scoring stage's attempt that runs now (the one with --partitions tasks), if any. */
        Optional<Stage> scoring() {
            return rest.stages().stream()
                    .filter(s -> s.status().equals("ACTIVE") && s.numTasks() == PARTITIONS)
                    .findFirst();
        }

        /** Polls until the scoring stage satisfies ready (then returns it with its tasks), failing if the job ends first. */
        Stage awaitScoring(String what, Predicate<List<Task>> ready) throws InterruptedException {
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (System.nanoTime() < deadline) {
                if (!process.isAlive()) {
                    fail(name + ": the job ended (exit " + process.exitValue() + ") before " + what + "; see " + log);
                }
                Optional<Stage> s = scoring();
                if (s.isPresent() && ready.test(rest.tasks(s.get()))) {
                    return s.get();
                }
                Thread.sleep(200);
            }
            throw new AssertionError(name + ": no " + what + " within " + RUN_LIMIT);
        }

        /** Waits for the driver to exit, snapshotting the driver's state meanwhile; returns its exit code. */
        int await() throws InterruptedException {
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (!process.waitFor(500, TimeUnit.MILLISECONDS)) {
                snapshot();
                if (System.nanoTime() > deadline) {
                    process.destroyForcibly();
                    fail(name + ": did not finish within " + RUN_LIMIT + "; see " + log);
                }
            }
            wallSeconds = (System.nanoTime() - t0) / 1e9;
            loadAverage = loadAverage();
            return process.exitValue();
        }

        /** Marks the fault as injected now. */
        void injected() {
            injectedAt = System.currentTimeMillis();
        }

        /** The scoring (or generating) stage's attempts: the stage whose first attempt ran --partitions tasks. */
        List<Stage> scoringAttempts() {
            int id = stages.stream()
                    .filter(s -> s.attemptId() == 0 && s.numTasks() == PARTITIONS)
                    .mapToInt(Stage::stageId)
                    .max()
                    .orElseThrow(() -> new AssertionError(name + ": no scoring stage seen: " + stages));
            return stages.stream().filter(s -> s.stageId() == id).toList();
        }

        /** Seconds from the scoring stage's first submission to its last attempt's completion (NaN: none seen). */
        double scoringSeconds() {
            if (stages.stream().noneMatch(s -> s.attemptId() == 0 && s.numTasks() == PARTITIONS)) {
                return Double.NaN;
            }
            List<Stage> a = scoringAttempts();
            return (done(a) - a.stream().mapToLong(Stage::submitted).min().orElseThrow()) / 1e3;
        }

        /** Seconds from the fault to the scoring stage's completion. */
        double faultToDoneSeconds() {
            if (stages.stream().noneMatch(s -> s.attemptId() == 0 && s.numTasks() == PARTITIONS)) {
                return Double.NaN;
            }
            return (done(scoringAttempts()) - injectedAt) / 1e3;
        }

        /** When the last attempt completed (NaN-making when the driver stopped before reporting it). */
        static double done(List<Stage> attempts) {
            return attempts.stream().anyMatch(s -> s.completed() == 0)
                    ? Double.NaN
                    : attempts.stream().mapToLong(Stage::completed).max().orElseThrow();
        }

        /** Task attempts of every stage seen, with their stage attempt. */
        List<Task> allTasks() {
            return tasks.values().stream().flatMap(List::stream).toList();
        }
    }

    static Run submit(String name, String job, List<String> conf, String... jobArgs) throws IOException {
        return submit(name, dir.resolve("out").resolve(name), job, conf, jobArgs);
    }

    static Run submit(String name, Path out, String job, List<String> conf, String... jobArgs) throws IOException {
        int ui = StandaloneCluster.freePort();
        List<String> submit = new ArrayList<>(List.of(
                "--master", cluster.masterUrl(), "--deploy-mode", "client", "--class", "dev.scorch.jobs.ScorchCli"));
        List<String> all = new ArrayList<>(clusterConf(ui));
        all.add("spark.executor.extraJavaOptions=" + String.join(" ", flags));
        all.addAll(conf);
        for (String c : all) {
            submit.add("--conf");
            submit.add(c);
        }
        submit.add(jobsJar.toString());
        submit.add(job);
        submit.addAll(job.equals("generate") ? List.of(generateArgs(out)) : args(out));
        submit.addAll(List.of(jobArgs));
        Path log = dir.resolve("logs").resolve(name + ".log");
        Process p =
                cluster.launch(cluster.sparkJvm("1g", "org.apache.spark.deploy.SparkSubmit", submit), Map.of(), log);
        return new Run(name, p, ui, out, log);
    }

    /** A job through bin/scorch --master spark://...: no spark.jars and no executor JVM flags given, the CLI adds both. */
    static Run binScorch(String name, String job, List<String> conf, String... jobArgs) throws IOException {
        int ui = StandaloneCluster.freePort();
        Path out = dir.resolve("out").resolve(name);
        Path root = Path.of(System.getProperty(
                        "scorch.root", jobsTarget.resolve("../..").toString()))
                .toAbsolutePath()
                .normalize();
        List<String> cmd =
                new ArrayList<>(List.of(root.resolve("bin/scorch").toString(), job, "--master", cluster.masterUrl()));
        cmd.addAll(job.equals("generate") ? List.of(generateArgs(out)) : args(out));
        cmd.addAll(List.of(jobArgs));
        for (String c : Stream.concat(clusterConf(ui).stream(), conf.stream()).toList()) {
            cmd.add("--spark-conf");
            cmd.add(c);
        }
        Path log = dir.resolve("logs").resolve(name + ".log");
        Process p = cluster.launch(
                cmd, Map.of("SCORCH_AOT", "off"), log); // the AOT cache trains on local[*]: not this test's business
        return new Run(name, p, ui, out, log);
    }

    /** The executor that ran the (single) shuffle map task: it holds the shuffle output the scoring stage reads. */
    static String shuffleHolder(Run run) {
        Stage map = run.rest.stages().stream()
                .filter(s -> s.status().equals("COMPLETE") && s.shuffleWriteBytes() > 0)
                .findFirst()
                .orElseThrow(() -> new AssertionError(run.name + ": no shuffle map stage: " + run.rest.stages()));
        return run.rest.tasks(map).stream()
                .filter(t -> t.status().equals("SUCCESS"))
                .findFirst()
                .orElseThrow()
                .executorId();
    }

    /**
     * The output's rows by id, each as a fingerprint of every column (floats and doubles by their bits); fails on an id
     * written twice.
     */
    static Map<String, String> rows(Path out) {
        List<Row> all = SparkTests.spark().read().parquet(out.toString()).collectAsList();
        Map<String, String> byId = new TreeMap<>();
        for (Row r : all) {
            Object id = r.get(r.fieldIndex("id"));
            if (byId.put(String.valueOf(id), fingerprint(r)) != null) {
                fail(out + ": id " + id + " written twice");
            }
        }
        return byId;
    }

    static String fingerprint(Object v) {
        if (v instanceof Row r) {
            StringBuilder b = new StringBuilder("{");
            StructField[] f = r.schema().fields();
            for (int i = 0; i < f.length; i++) {
                b.append(f[i].name()).append('=').append(fingerprint(r.get(i))).append(';');
            }
            return b.append('}').toString();
        }
        if (v instanceof scala.collection.Seq<?> s) {
            return scala.jdk.javaapi.CollectionConverters.asJava(s).stream()
                    .map(StandaloneClusterFaultTest::fingerprint)
                    .collect(Collectors.joining(",", "[", "]"));
        }
        if (v instanceof Float f) {
            return "f" + Integer.toHexString(Float.floatToRawIntBits(f));
        }
        if (v instanceof Double d) {
            return "d" + Long.toHexString(Double.doubleToRawLongBits(d));
        }
        return String.valueOf(v);
    }

    /** Every input row exactly once, each row bit for bit the local run's; the job committed (_SUCCESS, no _temporary). */
    static long assertSameAsLocal(Run run, Map<String, String> local) {
        assertTrue(Files.exists(run.out.resolve("_SUCCESS")), run.name + ": no _SUCCESS in " + run.out);
        assertFalse(
                Files.exists(run.out.resolve("_temporary")), run.name + ": uncommitted task output left in " + run.out);
        Map<String, String> got = rows(run.out);
        assertEquals(local.keySet(), got.keySet(), run.name + ": the output's ids differ from the input's");
        List<String> differ = local.keySet().stream()
                .filter(id -> !local.get(id).equals(got.get(id)))
                .limit(3)
                .toList();
        if (!differ.isEmpty()) {
            fail(run.name + ": rows differ from the local run, e.g. " + differ.get(0) + "\n local:   "
                    + local.get(differ.get(0)) + "\n cluster: " + got.get(differ.get(0)));
        }
        return got.size();
    }

    static double cleanScoringSeconds = Double.NaN;

    /** A clean run: the baseline is the fastest clean run (the faults' costs come out at their largest). */
    static void clean(Run run) {
        cleanSeconds = Double.isNaN(cleanSeconds) ? run.wallSeconds : Math.min(cleanSeconds, run.wallSeconds);
        cleanScoringSeconds = Double.isNaN(cleanScoringSeconds)
                ? run.scoringSeconds()
                : Math.min(cleanScoringSeconds, run.scoringSeconds());
    }

    /** The 5-minute load average from /proc/loadavg. */
    static String loadAverage() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).split(" ")[1];
        } catch (IOException e) {
            return "?";
        }
    }

    /** A run's line of the report, formatted at the end (against the fastest clean run). */
    record Figure(Run run, String job, long rowsOut, String fault, String note) {}

    static final List<Figure> figures = new ArrayList<>();

    static void figure(Run run, String job, long rowsOut, String fault, String note) {
        figures.add(new Figure(run, job, rowsOut, fault, note));
    }

    /** The report's table: rows, the fault, wall and scoring-stage times against the clean runs', what Spark redid. */
    static List<String> table() {
        List<String> out = new ArrayList<>(List.of(
                "| run | job | rows in | rows out | fault injected | wall (vs clean) | scoring stage (vs clean)"
                        + " | fault to stage done | what Spark redid | load avg |",
                "|---|---|---|---|---|---|---|---|---|---|"));
        for (Figure f : figures) {
            Run run = f.run();
            double scoring = run.scoringSeconds();
            boolean comparable = !f.job().startsWith("generate");
            out.add(String.format(
                    "| %s | %s | %d | %d | %s | %.1f s (%s) | %.1f s (%s) | %s | %s%s | %s |",
                    run.name,
                    f.job(),
                    ROWS,
                    f.rowsOut(),
                    f.fault(),
                    run.wallSeconds,
                    versus(run.wallSeconds, cleanSeconds, comparable),
                    scoring,
                    versus(scoring, cleanScoringSeconds, comparable),
                    run.injectedAt == 0 ? "-" : String.format("%.1f s", run.faultToDoneSeconds()),
                    attempts(run),
                    f.note().isEmpty() ? "" : "; " + f.note(),
                    run.loadAverage));
        }
        return out;
    }

    static String versus(double v, double clean, boolean comparable) {
        return !comparable ? "no clean generate run" : Double.isNaN(clean) ? "-" : String.format("%+.1f s", v - clean);
    }

    /** The executor JVM of this application with this executor id. */
    static ProcessHandle executor(Run run, String executorId) {
        ProcessHandle h = cluster.executors(run.appId()).get(executorId);
        if (h == null) {
            fail(run.name + ": no JVM for executor " + executorId + " among " + cluster.executors(run.appId()));
        }
        return h;
    }

    /** A held first attempt: its partition, and the executor (id and pid) it runs on. */
    record Held(int partition, String executorId, long pid) {}

    /**
     * A run's test-only hold (udfs' TestOnlyHold): the first attempts of the last two partitions wait, after their first
     * row, until released. Both held means one on each executor and the six other tasks done.
     */
    static final class Hold {
        static final List<Integer> HELD = List.of(PARTITIONS - 2, PARTITIONS - 1);
        final Path dir;

        Hold(String name) throws IOException {
            this.dir = Files.createDirectories(
                    StandaloneClusterFaultTest.dir.resolve("hold").resolve(name));
        }

        /** The Spark settings that turn the hold on. */
        List<String> conf() {
            return List.of(
                    TestOnlyHold.DIR + "=" + dir,
                    TestOnlyHold.PARTITIONS + "="
                            + HELD.stream().map(String::valueOf).collect(Collectors.joining(",")));
        }

        /** Waits until both held partitions are held; fails if the job ends first. */
        List<Held> awaitHeld(Run run) throws IOException, InterruptedException {
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (!HELD.stream().allMatch(p -> Files.exists(dir.resolve("held-" + p)))) {
                if (!run.process.isAlive()) {
                    fail(run.name + ": the job ended (exit " + run.process.exitValue() + ") before partitions " + HELD
                            + " were held; see " + run.log);
                }
                if (System.nanoTime() > deadline) {
                    fail(run.name + ": partitions " + HELD + " not held within " + RUN_LIMIT + "; see " + run.log);
                }
                run.snapshot(); // the report's stages: once released, the job may end before await() looks
                Thread.sleep(200);
            }
            run.snapshot();
            List<Held> held = new ArrayList<>();
            for (int p : HELD) {
                String line = Files.readString(dir.resolve("held-" + p)).trim();
                held.add(new Held(p, field(line, "executor"), Long.parseLong(field(line, "pid"))));
            }
            assertFalse(
                    held.get(0).executorId().equals(held.get(1).executorId()),
                    run.name + ": both held attempts on one executor: " + held);
            return held;
        }

        /** The held attempt on executor id (on), or on the other executor (!on). */
        static Held on(List<Held> held, String executorId, boolean on) {
            return held.stream()
                    .filter(h -> h.executorId().equals(executorId) == on)
                    .findFirst()
                    .orElseThrow(() -> new AssertionError((on ? "none" : "all") + " of " + held + " on " + executorId));
        }

        static String field(String line, String key) {
            for (String kv : line.split(" ")) {
                if (kv.startsWith(key + "=")) {
                    return kv.substring(key.length() + 1);
                }
            }
            throw new AssertionError("no " + key + " in " + line);
        }

        void release(int partition) throws IOException {
            Path f = dir.resolve("release-" + partition);
            if (!Files.exists(f)) {
                Files.createFile(f);
            }
        }

        void releaseAll() throws IOException {
            for (int p : HELD) {
                release(p);
            }
        }

        /** The (stage attempt, task attempt) pairs, "s.a", of partition's attempts that ran unheld. */
        List<String> ranAgain(int partition) throws IOException {
            try (Stream<Path> s = Files.list(dir)) {
                return s.map(q -> q.getFileName().toString())
                        .filter(n -> n.startsWith("ran-" + partition + "-"))
                        .map(n ->
                                n.substring(("ran-" + partition + "-").length()).replace('-', '.'))
                        .sorted()
                        .toList();
            }
        }
    }

    /** SIGKILLs h and waits until it is gone. */
    static void killAndAwait(ProcessHandle h) throws Exception {
        h.destroyForcibly();
        h.onExit().get(30, TimeUnit.SECONDS);
    }

    static String attempts(Run run) {
        long stageRetries = run.stages.stream().filter(s -> s.attemptId() > 0).count();
        long failed =
                run.allTasks().stream().filter(t -> t.status().equals("FAILED")).count();
        long killed =
                run.allTasks().stream().filter(t -> t.status().equals("KILLED")).count();
        long speculative = run.allTasks().stream().filter(Task::speculative).count();
        return failed + " task attempts failed, " + killed + " killed, " + speculative + " speculative, " + stageRetries
                + " stage attempts resubmitted";
    }

    @Test
    @Order(1)
    void cleanRunWithBroadcastWeightsUsesTheConfiguredModelCacheAndSweepsUnusedCopies() throws Exception {
        // A copy no application has used for two days, and files that are not Scorch's, in the configured cache folder.
        String stale = "0".repeat(64);
        Files.createDirectories(cacheDir.resolve(stale));
        Files.writeString(cacheDir.resolve(stale).resolve(".scorch-complete"), stale);
        Files.createDirectories(cacheDir.resolve("leases"));
        Files.createFile(cacheDir.resolve("leases").resolve(stale + ".lease"));
        Files.setLastModifiedTime(
                cacheDir.resolve("leases").resolve(stale + ".lease"),
                FileTime.from(Instant.now().minus(Duration.ofDays(2))));
        Files.writeString(cacheDir.resolve("README.txt"), "not Scorch's");

        Run run = submit("clean-broadcast", "score", List.of("spark.scorch.modelCache.maxUnusedAge=1h"));
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long out = assertSameAsLocal(run, localScores);
        clean(run);

        assertTrue(
                Files.isRegularFile(cacheDir.resolve(contentHash).resolve(".scorch-complete")),
                "the executors assembled the broadcast model in spark.scorch.modelCache.dir " + cacheDir);
        assertFalse(Files.exists(cacheDir.resolve(stale)), "the unused two-day-old copy was swept");
        assertEquals("not Scorch's", Files.readString(cacheDir.resolve("README.txt")));
        figure(run, "score", out, "none (--weights broadcast, the default)", "");
    }

    @Test
    @Order(2)
    void anExecutorKilledMidTaskThroughBinScorchWithFilesWeights() throws Exception {
        String name = "executor-sigkill-bin-scorch-files";
        Hold hold = new Hold(name);
        Run run = binScorch(name, "score", hold.conf(), "--weights", "files");
        Held victim;
        ProcessHandle h;
        try {
            List<Held> held = hold.awaitHeld(run);
            // The held attempt on the executor without the shuffle output: its retry runs on the other, a task retry
            // (the shuffle holder's kill is the next test's).
            victim = Hold.on(held, shuffleHolder(run), false);
            h = executor(run, victim.executorId());
            assertEquals(victim.pid(), h.pid(), run.name + ": the held attempt's pid");
            killAndAwait(h);
            run.injected();
        } finally {
            hold.releaseAll();
        }
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localScores);
        // Its first attempt died held, before its second row: the rows came from an attempt that ran again.
        assertFalse(
                hold.ranAgain(victim.partition()).isEmpty(),
                run.name + ": the killed task never re-ran: " + run.allTasks());
        // The executors moved the job's files into the host's model cache and left no copy in their application
        // folders (the Workers' folders hold only links the driver staged, never a model file).
        assertTrue(
                Files.isRegularFile(cacheDir.resolve(contentHash).resolve(".scorch-complete")),
                "the files-mode model is in the model cache " + cacheDir);
        try (Stream<Path> s = Files.walk(dir.resolve("worker-0"));
                Stream<Path> t = Files.walk(dir.resolve("worker-1"))) {
            List<Path> copies = Stream.concat(s, t)
                    .filter(q -> q.getFileName().toString().startsWith(contentHash + "-0-"))
                    .filter(q -> Files.isRegularFile(q, java.nio.file.LinkOption.NOFOLLOW_LINKS))
                    .toList();
            assertTrue(copies.size() <= 1, "model files left in the Workers' application folders: " + copies);
        }
        figure(
                run,
                "score (bin/scorch, --weights files)",
                n,
                "SIGKILL executor " + victim.executorId() + " (pid " + h.pid() + ") running scoring task "
                        + victim.partition() + " (held), 6 tasks done",
                "re-ran as " + hold.ranAgain(victim.partition()));
    }

    @Test
    @Order(3)
    void theExecutorHoldingTheShuffleOutputKilled() throws Exception {
        String name = "shuffle-holder-sigkill";
        Hold hold = new Hold(name);
        Run run = submit(name, "score", hold.conf());
        String holder;
        Held victim;
        ProcessHandle h;
        try {
            List<Held> held = hold.awaitHeld(run);
            holder = shuffleHolder(run);
            victim = Hold.on(held, holder, true);
            h = executor(run, holder);
            killAndAwait(h);
            run.injected();
        } finally {
            hold.releaseAll();
        }
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localScores);
        // The task that died with the shuffle output ran again in a resubmitted stage (its input had to be made again).
        List<String> again = hold.ranAgain(victim.partition());
        assertTrue(
                again.stream().anyMatch(a -> !a.startsWith("0."))
                        || run.stages.stream().anyMatch(s -> s.attemptId() > 0),
                run.name + ": no stage was resubmitted: " + run.stages + "; partition " + victim.partition()
                        + " ran again as " + again);
        figure(
                run,
                "score",
                n,
                "SIGKILL executor " + holder + " (pid " + h.pid()
                        + ") holding the shuffle output, running scoring task " + victim.partition()
                        + " (held), 6 tasks done",
                "re-ran as " + again);
    }

    @Test
    @Order(4)
    void speculationOutrunsAFrozenExecutor() throws Exception {
        String name = "speculation-sigstop";
        Hold hold = new Hold(name);
        List<String> conf = new ArrayList<>(List.of(
                "spark.speculation=true",
                "spark.speculation.interval=200ms",
                "spark.speculation.multiplier=2",
                "spark.speculation.quantile=0.5",
                "spark.speculation.minTaskRuntime=2s",
                "spark.speculation.efficiency.enabled=false"));
        conf.addAll(hold.conf());
        Run run = submit(name, "score", conf);
        Held frozen;
        ProcessHandle h = null;
        double stageDone;
        try {
            List<Held> held = hold.awaitHeld(run);
            Stage scoring = run.awaitScoring("the scoring stage", ts -> true);
            // Freeze the executor that does not hold the shuffle output, on its held attempt (the straggler), and let
            // the other's go: the copy runs there and reads its blocks locally. The copy is attempt 1: not held.
            String holder = shuffleHolder(run);
            frozen = Hold.on(held, holder, false);
            h = executor(run, frozen.executorId());
            StandaloneCluster.signal(h, "STOP");
            run.injected();
            long frozenAt = System.nanoTime();
            hold.release(Hold.on(held, holder, true).partition());
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (run.rest.stages().stream()
                    .noneMatch(
                            s -> s.stageId() == scoring.stageId() && s.status().equals("COMPLETE"))) {
                if (!run.process.isAlive() || System.nanoTime() > deadline) {
                    fail(run.name + ": the scoring stage did not complete while executor " + frozen.executorId()
                            + " was frozen; see " + run.log);
                }
                run.snapshot();
                Thread.sleep(250);
            }
            run.snapshot();
            stageDone = (System.nanoTime() - frozenAt) / 1e9;
        } finally {
            if (h != null) {
                StandaloneCluster.signal(
                        h, "CONT"); // the frozen attempt resumes and must not commit its rows a second time
            }
            hold.releaseAll();
        }
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localScores);
        // The stage completed while the original attempt was frozen, held: a copy (attempt 1 of the same stage attempt)
        // ran and finished it.
        List<String> again = hold.ranAgain(frozen.partition());
        assertTrue(again.contains("0.1"), run.name + ": no copy of task " + frozen.partition() + " ran: " + again);
        assertTrue(
                run.allTasks().stream().anyMatch(t -> t.index() == frozen.partition() && t.speculative()),
                run.name + ": no speculative copy of task " + frozen.partition() + " was launched: " + run.allTasks());
        figure(
                run,
                "score",
                n,
                "SIGSTOP executor " + frozen.executorId() + " (pid " + h.pid() + ") running scoring task "
                        + frozen.partition() + " (held), 6 tasks done"
                        + String.format(", SIGCONT once the stage completed (%.1f s later)", stageDone),
                "the speculative copy won");
    }

    @Test
    @Order(5)
    void generateWithAnExecutorKilledMidTask() throws Exception {
        String name = "generate-executor-sigkill";
        Hold hold = new Hold(name);
        Run run = submit(name, "generate", hold.conf());
        Held victim;
        ProcessHandle h;
        try {
            victim = Hold.on(hold.awaitHeld(run), shuffleHolder(run), false);
            h = executor(run, victim.executorId());
            killAndAwait(h);
            run.injected();
        } finally {
            hold.releaseAll();
        }
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localGenerated);
        assertFalse(
                hold.ranAgain(victim.partition()).isEmpty(),
                run.name + ": the killed task never re-ran: " + run.allTasks());
        figure(
                run,
                "generate",
                n,
                "SIGKILL executor " + victim.executorId() + " (pid " + h.pid() + ") running generating task "
                        + victim.partition() + " (held), 6 tasks done",
                "re-ran as " + hold.ranAgain(victim.partition()));
    }

    /** A second clean run, the baseline's other half; the executors reuse the copy the first run left in the model cache. */
    @Test
    @Order(7)
    void aSecondCleanRunReusesTheCachedCopy() throws Exception {
        Path marker = cacheDir.resolve(contentHash).resolve(".scorch-complete");
        FileTime assembled = Files.getLastModifiedTime(marker);
        Run run = submit("clean-broadcast-again", "score", List.of());
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localScores);
        assertEquals(
                assembled, Files.getLastModifiedTime(marker), "the copy of the first run was used, not made again");
        clean(run);
        figure(run, "score", n, "none (reuses the cached copy)", "");
    }

    /**
     * Two score jobs submitted together on one output: the one that takes the output's lease is held in its scoring
     * stage (on both executors) until the other has ended, which must be at once, exit 2, naming the holder's pid. The
     * output then holds every row once, as the local run's, and its marker is complete.
     */
    @Test
    @Order(6)
    void twoJobsStartedTogetherOnOneOutputOneIsRefused() throws Exception {
        Path out = dir.resolve("out").resolve("race");
        Hold hold = new Hold("race");
        Run[] runs = {submit("race-a", out, "score", hold.conf()), submit("race-b", out, "score", hold.conf())};
        Run winner;
        Run loser;
        try {
            long deadline = System.nanoTime() + RUN_LIMIT.toNanos();
            while (runs[0].process.isAlive() && runs[1].process.isAlive()) {
                if (System.nanoTime() > deadline) {
                    fail("neither of two jobs on one output ended within " + RUN_LIMIT + "; see " + runs[0].log);
                }
                Thread.sleep(100);
            }
            loser = runs[0].process.isAlive() ? runs[1] : runs[0];
            winner = loser == runs[0] ? runs[1] : runs[0];
            assertEquals(2, loser.process.exitValue(), loser.name + " is refused; see " + loser.log);
            String said = Files.readString(loser.log);
            assertTrue(
                    said.contains("is being written by another job") && said.contains("pid " + winner.process.pid()),
                    loser.name + " names the holder, pid " + winner.process.pid() + "; see " + loser.log);
            hold.awaitHeld(winner); // still running, held in its scoring stage: the two overlapped
        } finally {
            hold.releaseAll();
        }
        assertEquals(0, winner.await(), winner.name + ": see " + winner.log);
        long n = assertSameAsLocal(winner, localScores);
        com.fasterxml.jackson.databind.JsonNode marker = new com.fasterxml.jackson.databind.ObjectMapper()
                .readTree(out.resolve("_scorch.json").toFile());
        assertTrue(marker.path("complete").asBoolean(), "_scorch.json: " + marker);
        assertEquals(input.toString(), marker.path("input").asText(), "_scorch.json names the input");
        assertFalse(Files.exists(dir.resolve("out").resolve("_race.scorch-lease")), "the winner released its lease");
        figure(
                winner,
                "score",
                n,
                "a second job on the same --output, submitted together",
                loser.name + " refused (exit 2) naming the holder");
    }

    /** Last: the cluster has one Worker left after it. */
    @Test
    @Order(8)
    void aWorkerKilled() throws Exception {
        String name = "worker-sigkill";
        Hold hold = new Hold(name);
        Run run = submit(name, "score", hold.conf());
        Held victim;
        int worker;
        List<ProcessHandle> orphans;
        try {
            // Kill the Worker of the executor running the held task without the shuffle output: mid-stage, costing
            // running work. Released only once its executor is gone, so the held attempt cannot finish.
            victim = Hold.on(hold.awaitHeld(run), shuffleHolder(run), false);
            worker = cluster.underWorker(0, executor(run, victim.executorId())) ? 0 : 1;
            orphans = cluster.killWorker(worker);
            run.injected();
            for (ProcessHandle o : orphans) {
                o.onExit().completeOnTimeout(o, 30, TimeUnit.SECONDS).get();
                assertFalse(o.isAlive(), "executor pid " + o.pid() + " outlived its killed Worker by 30 s");
            }
        } finally {
            hold.releaseAll();
        }
        assertEquals(0, run.await(), run.name + ": see " + run.log);
        long n = assertSameAsLocal(run, localScores);
        assertFalse(
                hold.ranAgain(victim.partition()).isEmpty(),
                run.name + ": the task of the killed Worker's executor never re-ran: " + run.allTasks());
        figure(
                run,
                "score",
                n,
                "SIGKILL Worker " + worker + " (its executor, pid "
                        + orphans.stream().map(o -> String.valueOf(o.pid())).collect(Collectors.joining(", "))
                        + ", exits with it) running scoring task " + victim.partition() + " (held), 6 tasks done",
                "re-ran as " + hold.ranAgain(victim.partition()));
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        }
    }
}
