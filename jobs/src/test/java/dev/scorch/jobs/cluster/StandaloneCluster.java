package dev.scorch.jobs.cluster;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * A Spark standalone cluster on this machine: a Master and Workers as JVMs of their own, started from the Maven jars,
 * on 127.0.0.1 and free ports, all files under one folder.
 *
 * <p>The Workers build executor commands with Spark's launcher, which wants a Spark distribution. A folder with a RELEASE
 * file and jars/ of links to Spark's jars is one (with SPARK_SCALA_VERSION=2.13 set): the jobs build lists them in
 * classpath-provided.txt, and the libraries the shaded jar leaves to Spark in classpath-spark-shared.txt. So executors get
 * what a real cluster gives them and nothing of ours but the jar an application ships.
 *
 * <p>Worker i listens on 127.0.0.(i+1), so Spark sees each Worker's executors on a host of their own, as on a real
 * cluster: shuffle blocks go over the network between them (not read from the other's disk), and a speculative copy may
 * run beside an attempt that hangs (Spark never runs two attempts of a task on one host).
 *
 * <p>{@link #close} (and a shutdown hook, should the JVM exit first) kills every process started here and their
 * descendants (executors, which outlive a Worker killed with SIGKILL for a moment).
 */
final class StandaloneCluster implements AutoCloseable {
    static final String LOCALHOST = "127.0.0.1";

    final Path dir;
    final Path home;
    final String javaBin;
    final List<String> flags;
    final int workerCores;
    final String workerMemory;
    private final List<ProcessHandle> started = new CopyOnWriteArrayList<>();
    private final Thread hook = new Thread(this::killAll, "standalone-cluster-cleanup");
    private final HttpClient http =
            HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private final ObjectMapper json = new ObjectMapper();
    private final int masterPort;
    private final int masterUiPort;
    private final Process[] workers;

    private StandaloneCluster(
            Path dir, List<String> sparkJars, List<String> flags, int workers, int workerCores, String workerMemory)
            throws IOException {
        this.dir = dir;
        this.home = dir.resolve("spark-home");
        this.javaBin = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        this.flags = flags;
        this.workerCores = workerCores;
        this.workerMemory = workerMemory;
        this.workers = new Process[workers];
        this.masterPort = freePort();
        this.masterUiPort = freePort();
        Runtime.getRuntime().addShutdownHook(hook);
        Files.createDirectories(home.resolve("jars"));
        Files.writeString(home.resolve("RELEASE"), "Spark from the Maven class path (Scorch cluster tests)\n");
        for (String jar : sparkJars) {
            Path link = home.resolve("jars").resolve(Path.of(jar).getFileName());
            if (!Files.exists(link, LinkOption.NOFOLLOW_LINKS)) {
                Files.createSymbolicLink(link, Path.of(jar));
            }
        }
    }

    /**
     * Starts a Master and n Workers (cores and memory each) under dir, with Spark's jars read from the class path files the
     * jobs build wrote into jobsTarget; {@link #awaitReady} waits for them to register.
     */
    static StandaloneCluster start(Path dir, Path jobsTarget, List<String> flags, int n, int cores, String memory)
            throws Exception {
        List<String> jars = new ArrayList<>();
        for (String f : List.of("classpath-provided.txt", "classpath-spark-shared.txt")) {
            for (String j : Files.readString(jobsTarget.resolve(f)).trim().split(":")) {
                if (!j.isBlank()) {
                    jars.add(j);
                }
            }
        }
        StandaloneCluster c = new StandaloneCluster(dir, jars, flags, n, cores, memory);
        try {
            c.startMaster();
            for (int i = 0; i < n; i++) {
                c.startWorker(i, false);
            }
            return c;
        } catch (Exception | Error e) {
            c.close();
            throw e;
        }
    }

    /** Waits until every Worker has registered with the Master. */
    StandaloneCluster awaitReady() throws Exception {
        awaitAliveWorkers(workers.length, Duration.ofSeconds(180));
        return this;
    }

    /** The address Worker i (and its executors) listen on. */
    static String workerHost(int i) {
        return "127.0.0." + (i + 1);
    }

    String masterUrl() {
        return "spark://" + LOCALHOST + ":" + masterPort;
    }

    /** The Master's web UI (its state as JSON under /json/). */
    String masterUi() {
        return "http://" + LOCALHOST + ":" + masterUiPort;
    }

    /** The environment of every cluster process: the fake distribution, loopback only, this JVM's Java for executors. */
    Map<String, String> env() {
        Map<String, String> env = new TreeMap<>();
        env.put("SPARK_HOME", home.toString());
        env.put("SPARK_SCALA_VERSION", "2.13");
        env.put("SPARK_LOCAL_IP", LOCALHOST);
        env.put("JAVA_HOME", System.getProperty("java.home"));
        return env;
    }

    /** Starts a process with the cluster's environment, its output in log; it is killed by close(). */
    Process launch(List<String> command, Map<String, String> extraEnv, Path log) throws IOException {
        Files.createDirectories(log.getParent());
        ProcessBuilder pb = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .directory(dir.toFile());
        pb.environment().putAll(env());
        pb.environment().putAll(extraEnv);
        Process p = pb.start();
        started.add(p.toHandle());
        return p;
    }

    /** A JVM with Spark's jars on its class path and Scorch's flags (as spark-class and spark-submit would start one). */
    List<String> sparkJvm(String heap, String mainClass, List<String> args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(javaBin);
        cmd.addAll(flags);
        cmd.add("-Xmx" + heap);
        cmd.add("-cp");
        cmd.add(home.resolve("jars") + "/*");
        cmd.add(mainClass);
        cmd.addAll(args);
        return cmd;
    }

    private void startMaster() throws IOException {
        List<String> cmd = sparkJvm(
                "256m",
                "org.apache.spark.deploy.master.Master",
                List.of(
                        "--host",
                        LOCALHOST,
                        "--port",
                        String.valueOf(masterPort),
                        "--webui-port",
                        String.valueOf(masterUiPort)));
        // A Worker that stops heartbeating is dropped after 15 s, not the default 60 (a killed one is dropped when its
        // connection closes).
        cmd.add(1, "-Dspark.worker.timeout=15");
        cmd.add(1, "-XX:TieredStopAtLevel=1");
        launch(cmd, Map.of(), dir.resolve("logs/master.log"));
    }

    /** Starts Worker i (again, after a kill: a new JVM on new ports); with await, returns once it has registered. */
    void startWorker(int i, boolean await) throws Exception {
        if (workers[i] != null && workers[i].isAlive()) {
            throw new IllegalStateException("worker " + i + " runs");
        }
        Path work = Files.createDirectories(dir.resolve("worker-" + i));
        List<String> cmd = sparkJvm(
                "256m",
                "org.apache.spark.deploy.worker.Worker",
                List.of(
                        "--host",
                        workerHost(i),
                        "--port",
                        String.valueOf(freePort()),
                        "--webui-port",
                        String.valueOf(freePort()),
                        "--cores",
                        String.valueOf(workerCores),
                        "--memory",
                        workerMemory,
                        "--work-dir",
                        work.toString(),
                        masterUrl()));
        cmd.add(1, "-XX:TieredStopAtLevel=1"); // no computing in a Worker: C1 only starts faster (executors get the
        // application's flags)
        int alive = await ? aliveWorkers() : 0;
        workers[i] = launch(
                cmd,
                Map.of("SPARK_LOCAL_IP", workerHost(i)),
                dir.resolve("logs/worker-" + i + "-" + System.currentTimeMillis() + ".log"));
        if (await) {
            awaitAliveWorkers(alive + 1, Duration.ofSeconds(120));
        }
    }

    /** SIGKILLs Worker i's JVM (its executor notices the lost connection and exits). Returns the executors it had. */
    List<ProcessHandle> killWorker(int i) {
        List<ProcessHandle> children = workers[i].descendants().toList();
        started.addAll(children);
        workers[i].destroyForcibly();
        return children;
    }

    /** Whether h runs under Worker i (an executor it launched). */
    boolean underWorker(int i, ProcessHandle h) {
        return workers[i] != null && workers[i].descendants().anyMatch(h::equals);
    }

    boolean workerAlive(int i) {
        return workers[i] != null && workers[i].isAlive();
    }

    int aliveWorkers() throws IOException, InterruptedException {
        return masterState().path("aliveworkers").asInt(0);
    }

    /** The Master's state (its web UI's /json). */
    JsonNode masterState() throws IOException, InterruptedException {
        try {
            HttpResponse<String> r = http.send(
                    HttpRequest.newBuilder(URI.create("http://" + LOCALHOST + ":" + masterUiPort + "/json/"))
                            .timeout(Duration.ofSeconds(5))
                            .build(),
                    HttpResponse.BodyHandlers.ofString());
            return json.readTree(r.body());
        } catch (java.net.ConnectException e) {
            return json.createObjectNode();
        }
    }

    void awaitAliveWorkers(int n, Duration limit) throws Exception {
        long deadline = System.nanoTime() + limit.toNanos();
        while (aliveWorkers() < n) {
            for (Process w : workers) {
                if (w != null && !w.isAlive() && w.exitValue() != 137) {
                    throw new IllegalStateException(
                            "a worker exited with " + w.exitValue() + "; see " + dir.resolve("logs"));
                }
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(
                        n + " workers did not register within " + limit.toSeconds() + " s; see " + dir.resolve("logs"));
            }
            Thread.sleep(250);
        }
    }

    /** The executor JVMs the Workers run now, by executor id (from their command lines), for application appId. */
    Map<String, ProcessHandle> executors(String appId) {
        Map<String, ProcessHandle> out = new TreeMap<>();
        for (ProcessHandle h : descendantsOfWorkers()) {
            List<String> args = commandLine(h);
            int a = args.indexOf("--app-id");
            int e = args.indexOf("--executor-id");
            if (args.contains("org.apache.spark.executor.CoarseGrainedExecutorBackend")
                    && a >= 0
                    && e >= 0
                    && args.get(a + 1).equals(appId)) {
                out.put(args.get(e + 1), h);
            }
        }
        return out;
    }

    /** Every live descendant of the Workers (and of killed ones, which stay recorded). */
    List<ProcessHandle> descendantsOfWorkers() {
        Set<ProcessHandle> all = new LinkedHashSet<>();
        for (Process w : workers) {
            if (w != null) {
                w.descendants().forEach(all::add);
            }
        }
        started.stream().filter(ProcessHandle::isAlive).forEach(all::add);
        all.forEach(h -> {
            if (!started.contains(h)) {
                started.add(h);
            }
        });
        return all.stream().filter(ProcessHandle::isAlive).toList();
    }

    /** A process's arguments from /proc (ProcessHandle.Info may truncate a long class path). */
    static List<String> commandLine(ProcessHandle h) {
        try {
            byte[] b = Files.readAllBytes(Path.of("/proc", String.valueOf(h.pid()), "cmdline"));
            return List.of(new String(b, StandardCharsets.UTF_8).split("\0"));
        } catch (IOException e) {
            return List.of();
        }
    }

    /** Sends a signal (STOP, CONT) with kill(1). */
    static void signal(ProcessHandle h, String sig) throws IOException, InterruptedException {
        Process p = new ProcessBuilder("kill", "-" + sig, String.valueOf(h.pid()))
                .inheritIO()
                .start();
        if (p.waitFor() != 0) {
            throw new IllegalStateException("kill -" + sig + " " + h.pid() + " exited with " + p.exitValue());
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(LOCALHOST))) {
            return s.getLocalPort();
        }
    }

    Optional<Process> worker(int i) {
        return Optional.ofNullable(workers[i]);
    }

    @Override
    public void close() {
        killAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException ignored) {
            // the JVM is exiting: the hook runs anyway
        }
    }

    /** Kills every process started here and every descendant, then waits for them. */
    private void killAll() {
        List<ProcessHandle> all = new ArrayList<>();
        for (ProcessHandle h : started) {
            h.descendants().forEach(all::add);
            all.add(h);
        }
        for (ProcessHandle h : all) {
            resume(h); // a stopped process dies on SIGKILL too, but its children might wait on it
            h.destroyForcibly();
        }
        for (ProcessHandle h : all) {
            try {
                h.onExit().get(30, TimeUnit.SECONDS);
            } catch (Exception ignored) {
                // reported by the caller's checks, if it matters
            }
        }
    }

    private static void resume(ProcessHandle h) {
        try {
            if (h.isAlive()) {
                new ProcessBuilder("kill", "-CONT", String.valueOf(h.pid()))
                        .start()
                        .waitFor(5, TimeUnit.SECONDS);
            }
        } catch (IOException e) {
            // it is killed next anyway
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
