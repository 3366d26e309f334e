package dev.scorch.jobs.score;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.udfs.score.ScoreOptions;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * What the score job tests share: one local[2] SparkSession for the whole test JVM (made on first use,
 * stopped at exit), the conformance model and its golden file, a ScoreSpec builder with the CLI's
 * defaults, and readers for the job's output.
 */
public final class SparkTests {
    private static SparkSession spark;
    private static JsonNode golden;

    private SparkTests() {}

    /** The shared session: local[2], no UI, few shuffle partitions. */
    public static synchronized SparkSession spark() {
        if (spark == null || spark.sparkContext().isStopped()) {
            spark = SparkSession.builder()
                    .master("local[2]")
                    .appName("scorch-jobs-tests")
                    .config("spark.ui.enabled", "false")
                    .config("spark.ui.showConsoleProgress", "false")
                    .config("spark.sql.shuffle.partitions", "2")
                    .config("spark.default.parallelism", "2")
                    .config("spark.driver.host", "127.0.0.1")
                    .config("spark.driver.bindAddress", "127.0.0.1")
                    .getOrCreate();
            SparkSession s = spark;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                if (!s.sparkContext().isStopped()) {
                    s.stop();
                }
            }));
        }
        return spark;
    }

    /** Stops the shared session (a test that needs another master calls this first). */
    public static synchronized void stopShared() {
        if (spark != null && !spark.sparkContext().isStopped()) {
            spark.stop();
        }
        spark = null;
        SparkSession.clearActiveSession();
        SparkSession.clearDefaultSession();
    }

    /** The JVM flags the launcher and Surefire use: scorch-jvm.flags, filtered from the parent pom into target/classes. */
    public static List<String> jvmFlags() {
        try (InputStream in = SparkTests.class.getClassLoader().getResourceAsStream("scorch-jvm.flags")) {
            if (in == null) {
                throw new IllegalStateException(
                        "scorch-jvm.flags is not on the class path (run mvn process-resources)");
            }
            String flags = new String(in.readAllBytes(), StandardCharsets.UTF_8).trim();
            if (flags.contains("${")) {
                throw new IllegalStateException("scorch-jvm.flags was not filtered: " + flags);
            }
            return java.util.Arrays.asList(flags.split("\\s+"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** This test JVM's class path (Surefire runs tests from a manifest-only jar; it keeps the real one here). */
    public static String classPath() {
        return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
    }

    /** Waits until the listener bus has delivered every event posted so far. */
    static void drainListeners() {
        try {
            spark().sparkContext().listenerBus().waitUntilEmpty(30_000);
        } catch (java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException("Spark listener bus did not drain", e);
        }
    }

    static Path resource(String name) {
        var url = SparkTests.class.getClassLoader().getResource(name);
        if (url == null) {
            throw new IllegalStateException("test resource " + name + " is missing");
        }
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    public static Path conformanceModel() {
        return resource("conformance/tiny-k2-bf16/model");
    }

    public static synchronized JsonNode golden() {
        if (golden == null) {
            try {
                golden = new ObjectMapper()
                        .readTree(
                                resource("conformance/tiny-k2-bf16/golden.json").toFile());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return golden;
    }

    /** The golden prompts' token ids, in file order. */
    static List<long[]> goldenPrompts() {
        List<long[]> out = new ArrayList<>();
        for (JsonNode p : golden().get("prompts")) {
            long[] t = new long[p.get("token_ids").size()];
            for (int i = 0; i < t.length; i++) {
                t[i] = p.get("token_ids").get(i).asLong();
            }
            out.add(t);
        }
        return out;
    }

    /** The golden prompts as a JSONL input under dir (ids 0, 1, ...). */
    public static Path goldenInput(Path dir) {
        List<long[]> prompts = goldenPrompts();
        List<String> lines = new java.util.ArrayList<>();
        for (int i = 0; i < prompts.size(); i++) {
            lines.add(row(i, prompts.get(i)));
        }
        return writeJsonl(dir.resolve("in/prompts.jsonl"), lines);
    }

    /** Writes one JSON object per line. */
    public static Path writeJsonl(Path file, List<String> lines) {
        try {
            Files.createDirectories(file.getParent());
            Files.write(file, lines);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** {"id":ID,"token_ids":[...]} */
    static String row(Object id, long[] tokens) {
        StringBuilder b =
                new StringBuilder("{\"id\":").append(id instanceof String s ? "\"" + s + "\"" : String.valueOf(id));
        b.append(",\"token_ids\":[");
        for (int i = 0; i < tokens.length; i++) {
            b.append(i == 0 ? "" : ",").append(tokens[i]);
        }
        return b.append("]}").toString();
    }

    /** Deterministic random token ids in [0, vocab). */
    static long[] randomTokens(java.util.Random r, int n, int vocab) {
        long[] t = new long[n];
        for (int i = 0; i < n; i++) {
            t[i] = r.nextInt(vocab);
        }
        return t;
    }

    /** A ScoreSpec with the CLI's defaults (Parquet out, 4096-token batches, 256-row windows, shared-path, 1 thread, backend auto). */
    static Spec spec(Path model, Path input, Path output) {
        return new Spec(model, input.toString(), output.toString());
    }

    static final class Spec {
        Path model;
        String input;
        String inputFormat;
        String output;
        String outputFormat = "parquet";
        int partitions = 2;
        int maxBatchTokens = 4096;
        int windowRows = 256;
        long arrowMemoryBytes = 1024L << 20;
        int topK;
        LogitsMode logits = LogitsMode.NONE;
        String weights = "shared-path";
        int threads = 1;
        int slices = 1;
        WriteMode write = WriteMode.NEW;
        BackendMode backend = BackendMode.AUTO;
        GemmPrecision gpuPrecision = ScoreOptions.defaultGpuPrecision();
        int pipelineNodes;

        Spec(Path model, String input, String output) {
            this.model = model;
            this.input = input;
            this.output = output;
        }

        Spec partitions(int v) {
            partitions = v;
            return this;
        }

        Spec maxBatchTokens(int v) {
            maxBatchTokens = v;
            return this;
        }

        Spec windowRows(int v) {
            windowRows = v;
            return this;
        }

        Spec topK(int v) {
            topK = v;
            return this;
        }

        Spec logits(LogitsMode v) {
            logits = v;
            return this;
        }

        Spec threads(int v) {
            threads = v;
            return this;
        }

        Spec weights(String v) {
            weights = v;
            return this;
        }

        Spec slices(int v) {
            slices = v;
            return this;
        }

        Spec outputFormat(String v) {
            outputFormat = v;
            return this;
        }

        Spec output(Path v) {
            output = v.toString();
            return this;
        }

        Spec overwrite(boolean v) {
            write = v ? WriteMode.OVERWRITE : WriteMode.NEW;
            return this;
        }

        Spec resume(boolean v) {
            write = v ? WriteMode.RESUME : WriteMode.NEW;
            return this;
        }

        Spec write(WriteMode v) {
            write = v;
            return this;
        }

        Spec inputFormat(String v) {
            inputFormat = v;
            return this;
        }

        Spec backend(BackendMode v) {
            backend = v;
            return this;
        }

        Spec pipelineNodes(int v) {
            pipelineNodes = v;
            return this;
        }

        ScoreSpec build() {
            return new ScoreSpec(
                    model.toString(),
                    input,
                    inputFormat,
                    output,
                    outputFormat,
                    partitions,
                    maxBatchTokens,
                    windowRows,
                    arrowMemoryBytes,
                    topK,
                    logits,
                    "id",
                    "token_ids",
                    "prompt",
                    "continuation",
                    weights,
                    threads,
                    slices,
                    write,
                    backend,
                    gpuPrecision,
                    ScoreOptions.DEFAULT_GPU_BATCH_TOKENS,
                    pipelineNodes,
                    null);
        }

        ScoreSummary run() {
            return run(spark());
        }

        ScoreSummary run(SparkSession session) {
            try {
                return ScoreJob.run(session, build());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** One output row, as plain Java values. */
    record Scored(
            Object id,
            Integer numTokens,
            List<Integer> tokenIds,
            List<Float> tokenLogprobs,
            Double sum,
            Double mean,
            Double perplexity,
            String error,
            String model) {}

    static final StructType JSON_OUTPUT = new StructType()
            .add("id", DataTypes.StringType)
            .add("num_tokens", DataTypes.IntegerType)
            .add("token_ids", new ArrayType(DataTypes.IntegerType, true))
            .add("token_logprobs", new ArrayType(DataTypes.FloatType, true))
            .add("sum_logprob", DataTypes.DoubleType)
            .add("mean_logprob", DataTypes.DoubleType)
            .add("perplexity", DataTypes.DoubleType)
            .add("error", DataTypes.StringType)
            .add("model", DataTypes.StringType);

    /** The output folder's rows (Parquet or JSONL), by id's string form; fails on a duplicate id. */
    static Map<String, Scored> readOutput(Path out, String format) {
        return readOutput(spark(), out, format);
    }

    static Map<String, Scored> readOutput(SparkSession session, Path out, String format) {
        var reader = session.read();
        // JSONL is read with the output's own types (floats parsed as floats, ids kept as their text).
        var df = format.equals("parquet")
                ? reader.parquet(out.toString())
                : reader.schema(JSON_OUTPUT).json(out.toString());
        Map<String, Scored> rows = new TreeMap<>();
        List<String> cols = List.of(df.columns());
        for (Row r : df.collectAsList()) {
            Scored s = new Scored(
                    r.getAs("id"),
                    intOrNull(r, "num_tokens"),
                    ints(r, "token_ids", cols),
                    floats(r, "token_logprobs", cols),
                    (Double) dbl(r, "sum_logprob"),
                    (Double) dbl(r, "mean_logprob"),
                    (Double) dbl(r, "perplexity"),
                    r.getAs("error"),
                    r.getAs("model"));
            Scored prev = rows.put(String.valueOf(s.id()), s);
            if (prev != null) {
                throw new AssertionError("id " + s.id() + " appears twice in " + out);
            }
        }
        return rows;
    }

    private static Integer intOrNull(Row r, String c) {
        Object v = r.getAs(c);
        return v == null ? null : ((Number) v).intValue();
    }

    private static Object dbl(Row r, String c) {
        Object v = r.getAs(c);
        return v == null ? null : ((Number) v).doubleValue();
    }

    private static List<Integer> ints(Row r, String c, List<String> cols) {
        if (!cols.contains(c) || r.isNullAt(r.fieldIndex(c))) {
            return null;
        }
        List<Integer> out = new ArrayList<>();
        for (Object o : r.getList(r.fieldIndex(c))) {
            out.add(o == null ? null : ((Number) o).intValue());
        }
        return out;
    }

    private static List<Float> floats(Row r, String c, List<String> cols) {
        if (!cols.contains(c) || r.isNullAt(r.fieldIndex(c))) {
            return null;
        }
        List<Float> out = new ArrayList<>();
        for (Object o : r.getList(r.fieldIndex(c))) {
            out.add(o == null ? null : ((Number) o).floatValue());
        }
        return out;
    }

    static void deleteTree(Path p) {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(q);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
