package dev.scorch.jobs;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * On a cluster master, waits (a bounded time) for the first executor to register before the job starts, and fails with
 * what was asked for and what the cluster offers when none does. Without it, executors a cluster cannot place (4-core
 * 8 GB executors on 1-core Workers) leave the job waiting for ever, logging only "Initial job has not accepted any
 * resources".
 */
public final class ExecutorWait {
    /** Seconds to wait for the first executor (default {@value #DEFAULT_SECONDS}; 0: do not wait or check). */
    public static final String CONF = "spark.scorch.executorWait";

    public static final long DEFAULT_SECONDS = 120;
    /**
     * The standalone Master's web UI (default http://MASTER_HOST:8080), whose /json the failure reads to say what the
     * Workers offer.
     */
    public static final String MASTER_UI_CONF = "spark.scorch.masterUi";

    private ExecutorWait() {}

    /** Returns once an executor has registered; throws after spark.scorch.executorWait seconds without one. */
    public static void await(SparkSession spark) {
        SparkContext sc = spark.sparkContext();
        SparkConf conf = sc.getConf();
        String master = sc.master();
        if (isLocal(master) || dynamicWithoutMinimum(conf)) {
            return;
        }
        long seconds = conf.getLong(CONF, DEFAULT_SECONDS);
        if (seconds <= 0) {
            return;
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(seconds).toNanos();
        while (executors(sc) == 0) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(message(conf, master, seconds));
            }
            try {
                Thread.sleep(250);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for executors", e);
            }
        }
    }

    static boolean isLocal(String master) {
        return master.equals("local") || master.startsWith("local[");
    }

    /** Dynamic allocation that may start with no executor: executors come only once a job asks for them. */
    private static boolean dynamicWithoutMinimum(SparkConf conf) {
        return conf.getBoolean("spark.dynamicAllocation.enabled", false)
                && conf.getInt("spark.dynamicAllocation.minExecutors", 0) == 0
                && conf.getInt(
                                "spark.dynamicAllocation.initialExecutors",
                                conf.getInt("spark.dynamicAllocation.minExecutors", 0))
                        == 0;
    }

    /** Executors registered with the driver (the status tracker lists the driver too). */
    static int executors(SparkContext sc) {
        return Math.max(0, sc.statusTracker().getExecutorInfos().length - 1);
    }

    /** What was asked for and, on a standalone master, what its Workers offer. */
    static String message(SparkConf conf, String master, long seconds) {
        String cores = conf.contains("spark.executor.cores")
                ? conf.get("spark.executor.cores") + " cores"
                : "cores not set (standalone: all of a Worker's free cores, at least 1)";
        String memory = conf.get("spark.executor.memory", "1g");
        long memoryMib = conf.getSizeAsMb("spark.executor.memory", "1g");
        String asked = "no executor registered within " + seconds + " s (" + CONF + "): the application asks for"
                + " executors of " + cores + " and " + memory + " (" + memoryMib + " MiB) of memory"
                + " (spark.executor.cores, spark.executor.memory)";
        if (!master.startsWith("spark://")) {
            return asked + " on master " + master + "; check that the cluster has room for one such executor, or lower"
                    + " spark.executor.cores and spark.executor.memory";
        }
        String ui = masterUi(conf, master);
        String offer;
        try {
            offer = offer(readJson(ui + "/json/"));
        } catch (Exception e) {
            offer = "what its Workers offer could not be read from " + ui + "/json/ (" + e.getMessage() + "; set "
                    + MASTER_UI_CONF + " to the Master's web UI)";
        }
        return asked + "; the standalone Master " + master + " has " + offer + ". Lower spark.executor.cores and"
                + " spark.executor.memory (e.g. in the --conf file) to what one Worker offers, or give the Workers more"
                + " (SPARK_WORKER_CORES, SPARK_WORKER_MEMORY)";
    }

    /** The Master's web UI: spark.scorch.masterUi, else http://HOST:8080 of the first master in spark://HOST:PORT,... */
    static String masterUi(SparkConf conf, String master) {
        if (conf.contains(MASTER_UI_CONF)) {
            return conf.get(MASTER_UI_CONF).replaceAll("/+$", "");
        }
        String hostPort = master.substring("spark://".length()).split(",")[0];
        int colon = hostPort.lastIndexOf(':');
        String host = colon > 0 ? hostPort.substring(0, colon) : hostPort;
        return "http://" + host + ":8080";
    }

    private static JsonNode readJson(String url) throws Exception {
        HttpClient http =
                HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
        HttpResponse<String> r = http.send(
                HttpRequest.newBuilder(URI.create(url))
                        .timeout(Duration.ofSeconds(10))
                        .build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) {
            throw new IllegalStateException("HTTP " + r.statusCode());
        }
        return new ObjectMapper().readTree(r.body());
    }

    /** The alive Workers of the Master's /json state, each with its cores and memory (and what is free of them). */
    static String offer(JsonNode state) {
        List<String> workers = new ArrayList<>();
        for (JsonNode w : state.path("workers")) {
            if (!w.path("state").asText("ALIVE").equals("ALIVE")) {
                continue;
            }
            workers.add(String.format(
                    Locale.ROOT,
                    "%s: %d cores (%d free), %d MiB (%d MiB free)",
                    w.path("host").asText("?"),
                    w.path("cores").asInt(),
                    w.path("coresfree").asInt(),
                    w.path("memory").asLong(),
                    w.path("memoryfree").asLong()));
        }
        if (workers.isEmpty()) {
            return "no alive Workers";
        }
        return workers.size() + " alive Worker" + (workers.size() == 1 ? "" : "s") + " (" + String.join("; ", workers)
                + ")";
    }
}
