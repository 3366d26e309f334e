package dev.scorch.udfs.sql;

import static org.apache.spark.sql.functions.call_function;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.expr;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.TokenizerException;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.zip.GZIPInputStream;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The tokenizer SQL functions on the real DeepSeek-V3 tokenizer, in a local[2] session: ids as the
 * reference implementation gives them (expected.json, without special tokens), round trips, chat
 * templates, nulls, one load per JVM, and the errors.
 */
class ScorchFunctionsTest {
    static final String RES = "tokenizers/deepseek-v3/";
    static final StructType MESSAGE =
            new StructType().add("role", DataTypes.StringType).add("content", DataTypes.StringType);
    static final StructType CHATS =
            new StructType().add("i", DataTypes.IntegerType).add("messages", new ArrayType(MESSAGE, true));

    @TempDir
    static Path tmp;

    static SparkSession spark;
    static Path tokenizerDir;
    static JsonNode expected;
    static TokenizerShipment shipment;

    @BeforeAll
    static void setUp() throws IOException {
        // tokenizer.json (gunzipped) and tokenizer_config.json, as a model folder holds them.
        tokenizerDir = Files.createDirectories(tmp.resolve("deepseek-v3"));
        try (InputStream in = new GZIPInputStream(Files.newInputStream(resource(RES + "tokenizer.json.gz")))) {
            Files.copy(in, tokenizerDir.resolve("tokenizer.json"));
        }
        Files.copy(resource(RES + "tokenizer_config.json"), tokenizerDir.resolve("tokenizer_config.json"));
        expected = new ObjectMapper().readTree(resource(RES + "expected.json").toFile());
        spark = SparkSession.builder()
                .master("local[2]")
                .appName("scorch-udfs-sql-tests")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .config("spark.default.parallelism", "2")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .getOrCreate();
        shipment = ScorchFunctions.register(spark, tokenizerDir);
    }

    @AfterAll
    static void tearDown() {
        if (spark != null) {
            spark.stop();
            SparkSession.clearActiveSession();
            SparkSession.clearDefaultSession();
        }
    }

    static Path resource(String name) {
        var url = ScorchFunctionsTest.class.getClassLoader().getResource(name);
        if (url == null) {
            throw new IllegalStateException("test resource " + name + " is missing");
        }
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The 40 cases as a view cases(i INT, text STRING). */
    static Dataset<Row> cases() {
        List<Row> rows = new ArrayList<>();
        int i = 0;
        for (JsonNode c : expected.get("cases")) {
            rows.add(RowFactory.create(i++, c.get("text").asText()));
        }
        Dataset<Row> df = spark.createDataFrame(
                rows, new StructType().add("i", DataTypes.IntegerType).add("text", DataTypes.StringType));
        df.createOrReplaceTempView("cases");
        return df;
    }

    static int[] expectedIds(int i) {
        JsonNode ids = expected.get("cases").get(i).get("ids");
        int[] out = new int[ids.size()];
        for (int j = 0; j < out.length; j++) {
            out[j] = ids.get(j).asInt();
        }
        return out;
    }

    static int[] ints(Row r, String field) {
        List<Object> l = r.getList(r.fieldIndex(field));
        return l.stream().mapToInt(o -> ((Number) o).intValue()).toArray();
    }

    static int[] withBos(int[] ids) {
        int[] out = new int[ids.length + 1];
        out[0] = 0; // <｜begin▁of▁sentence｜>
        System.arraycopy(ids, 0, out, 1, ids.length);
        return out;
    }

    @Test
    void tokenizeMatchesTheReferenceIdsInSql() {
        assertEquals(40, expected.get("cases").size());
        cases();
        List<Row> rows = spark.sql("""
        SELECT i, text,
               scorch_tokenize(text) AS with_specials,
               scorch_tokenize_raw(text) AS raw,
               scorch_num_tokens(text) AS n,
               scorch_detokenize(scorch_tokenize_raw(text)) AS back_raw,
               scorch_detokenize(scorch_tokenize(text)) AS back
        FROM cases ORDER BY i""").collectAsList();
        assertEquals(40, rows.size());
        Tokenizer tokenizer = ExecutorTokenizerCache.tokenizer(shipment);
        int special = 0;
        for (Row r : rows) {
            int i = r.getInt(0);
            String text = r.getString(1);
            int[] ids = expectedIds(i);
            assertArrayEquals(withBos(ids), ints(r, "with_specials"), "scorch_tokenize of case " + i + ": " + text);
            assertArrayEquals(ids, ints(r, "raw"), "scorch_tokenize_raw of case " + i + ": " + text);
            assertEquals(ids.length + 1, r.getInt(r.fieldIndex("n")), "scorch_num_tokens of case " + i);
            // Special tokens written in the text (case 34 holds BOS as text) are skipped on the way back.
            String plain = text;
            for (int id : ids) {
                if (tokenizer.isSpecial(id)) {
                    plain = plain.replace(new String(tokenizer.tokenBytes(id), StandardCharsets.UTF_8), "");
                }
            }
            assertEquals(plain, r.getString(r.fieldIndex("back_raw")), "round trip of case " + i);
            assertEquals(plain, r.getString(r.fieldIndex("back")), "round trip (BOS skipped) of case " + i);
            special += plain.equals(text) ? 0 : 1;
        }
        assertTrue(special < 5, special + " cases hold special tokens");
        assertEquals(
                "ArrayType(IntegerType,false)",
                spark.sql("SELECT scorch_tokenize('x') AS t")
                        .schema()
                        .apply("t")
                        .dataType()
                        .toString());
    }

    @Test
    void dataFrameApiCallsTheSameFunctions() {
        List<Row> rows = cases().select(
                        col("i"),
                        call_function(ScorchFunctions.TOKENIZE_RAW, col("text")).as("raw"),
                        expr("scorch_num_tokens(text)").as("n"))
                .orderBy("i")
                .collectAsList();
        for (Row r : rows) {
            int i = r.getInt(0);
            assertArrayEquals(expectedIds(i), ints(r, "raw"), "case " + i);
            assertEquals(expectedIds(i).length + 1, r.getInt(2), "case " + i);
        }
    }

    @Test
    void detokenizeAcceptsBigintArrays() {
        Row r = spark.sql("SELECT scorch_detokenize(array(CAST(0 AS BIGINT), 19923L, 2058L, 3L))")
                .first();
        assertEquals("Hello world!", r.getString(0));
    }

    static Dataset<Row> chats() {
        List<Row> rows = new ArrayList<>();
        int i = 0;
        for (JsonNode c : expected.get("chats")) {
            assertTrue(c.get("add_generation_prompt").asBoolean());
            List<Row> msgs = new ArrayList<>();
            for (JsonNode m : c.get("messages")) {
                msgs.add(RowFactory.create(
                        m.get("role").asText(), m.get("content").asText()));
            }
            rows.add(RowFactory.create(i++, msgs));
        }
        return spark.createDataFrame(rows, CHATS);
    }

    @Test
    void chatRendersTheTemplate() {
        chats().createOrReplaceTempView("chats");
        List<Row> rows = spark.sql("""
        SELECT i, scorch_chat(messages) AS prompt, scorch_tokenize_raw(scorch_chat(messages)) AS ids
        FROM chats ORDER BY i""").collectAsList();
        assertEquals(2, rows.size());
        for (Row r : rows) {
            int i = r.getInt(0);
            assertEquals(expected.get("chats").get(i).get("rendered").asText(), r.getString(1), "chat " + i);
            int[] ids = ints(r, "ids");
            assertEquals(0, ids[0], "the rendered chat starts with BOS");
            assertNotEquals(0, ids[1], "and holds it once");
        }
        // A literal array of named structs, straight from SQL.
        String prompt = spark.sql("SELECT scorch_chat(array(named_struct('role', 'user', 'content', 'What is 2+2?')))")
                .first()
                .getString(0);
        assertEquals(expected.get("chats").get(0).get("rendered").asText(), prompt);
    }

    @Test
    void nullRowsGiveNull() {
        StructType schema = new StructType()
                .add("text", DataTypes.StringType)
                .add("ids", new ArrayType(DataTypes.IntegerType, true))
                .add("messages", new ArrayType(MESSAGE, true));
        List<Row> rows = List.of(RowFactory.create(null, null, null), RowFactory.create("a", List.of(64), List.of()));
        spark.createDataFrame(rows, schema).createOrReplaceTempView("maybe_null");
        List<Row> out = spark.sql("""
        SELECT scorch_tokenize(text), scorch_tokenize_raw(text), scorch_num_tokens(text), scorch_detokenize(ids),
               scorch_chat(messages), text IS NULL AS is_null
        FROM maybe_null""").collectAsList();
        assertEquals(2, out.size());
        for (Row r : out) {
            if (r.getBoolean(5)) {
                for (int c = 0; c < 5; c++) {
                    assertTrue(r.isNullAt(c), "column " + c + " of the null row");
                }
            } else {
                for (int c = 0; c < 5; c++) {
                    assertTrue(!r.isNullAt(c), "column " + c + " of the non-null row");
                }
                assertEquals(
                        "<｜begin▁of▁sentence｜><｜Assistant｜>",
                        r.getString(4),
                        "an empty chat: BOS and the generation prompt");
            }
        }
        Row lit = spark.sql(
                        "SELECT scorch_tokenize(CAST(NULL AS STRING)), scorch_detokenize(CAST(NULL AS ARRAY<INT>)), "
                                + "scorch_num_tokens(NULL), scorch_chat(NULL)")
                .first();
        for (int c = 0; c < 4; c++) {
            assertTrue(lit.isNullAt(c), "literal null, column " + c);
        }
    }

    @Test
    void tokenizerIsLoadedOncePerJvmOverFourPartitions() {
        // The driver loaded it at registration; drop it so the tasks have to load it.
        assertTrue(ExecutorTokenizerCache.evict(shipment.contentHash()));
        int before = ExecutorTokenizerCache.loads();
        Dataset<Row> texts = spark.range(0, 400, 1, 4)
                .selectExpr("concat('row ', CAST(id AS STRING), ' of four partitions') AS text");
        assertEquals(4, texts.rdd().getNumPartitions());
        List<Row> out = texts.selectExpr(
                        "scorch_num_tokens(text) AS n", "scorch_detokenize(scorch_tokenize(text)) = text AS same")
                .collectAsList();
        assertEquals(400, out.size());
        out.forEach(r -> assertTrue(r.getBoolean(1)));
        assertEquals(before + 1, ExecutorTokenizerCache.loads(), "one load for 4 partitions on 2 task threads");
        // Another query, another function: still loaded.
        spark.range(0, 100, 1, 4)
                .selectExpr("scorch_tokenize_raw(CAST(id AS STRING))")
                .collectAsList();
        assertEquals(before + 1, ExecutorTokenizerCache.loads());
        Path local = ExecutorModelCache.cacheRoot().resolve("tokenizers").resolve(shipment.contentHash());
        assertTrue(Files.isRegularFile(local.resolve("tokenizer.json")), local.toString());
        assertTrue(Files.isRegularFile(local.resolve(TokenizerShipment.COMPLETE)), local.toString());
    }

    @Test
    void materializeWritesTheShippedFilesOnce(@TempDir Path cache) throws IOException {
        TokenizerShipment.DriverFiles files = TokenizerShipment.read(tokenizerDir);
        assertEquals(List.of("tokenizer.json", "tokenizer_config.json"), files.names());
        assertEquals(shipment.contentHash(), files.contentHash());
        assertEquals(files.names(), shipment.fileNames());
        TokenizerShipment s = TokenizerShipment.ship(JavaSparkContext.fromSparkContext(spark.sparkContext()), files);
        try {
            Path dir = s.materialize(cache);
            assertEquals(cache.resolve("tokenizers").resolve(files.contentHash()), dir);
            for (String n : files.names()) {
                assertArrayEquals(Files.readAllBytes(tokenizerDir.resolve(n)), Files.readAllBytes(dir.resolve(n)), n);
            }
            assertEquals(files.contentHash(), Files.readString(dir.resolve(TokenizerShipment.COMPLETE)));
            long modified =
                    Files.getLastModifiedTime(dir.resolve("tokenizer.json")).toMillis();
            assertEquals(dir, s.materialize(cache));
            assertEquals(
                    modified,
                    Files.getLastModifiedTime(dir.resolve("tokenizer.json")).toMillis());
            try (var l = Files.list(cache.resolve("tokenizers"))) {
                assertEquals(1, l.count(), "no partial folders left");
            }
        } finally {
            s.destroy();
        }
    }

    @Test
    void contentHashCoversNamesAndBytes() {
        byte[] a = {1, 2, 3};
        String h = TokenizerShipment.hash(List.of("tokenizer.json"), List.of(a));
        assertEquals(64, h.length());
        assertEquals(h, TokenizerShipment.hash(List.of("tokenizer.json"), List.of(a.clone())));
        assertNotEquals(h, TokenizerShipment.hash(List.of("tiktoken.model"), List.of(a)));
        assertNotEquals(h, TokenizerShipment.hash(List.of("tokenizer.json"), List.of(new byte[] {1, 2, 4})));
        // Bytes cannot slide from one file into the next.
        assertNotEquals(
                TokenizerShipment.hash(List.of("a", "b"), List.of(new byte[] {1}, new byte[] {2, 3})),
                TokenizerShipment.hash(List.of("a", "b"), List.of(new byte[] {1, 2}, new byte[] {3})));
    }

    @Test
    void aFolderWithoutATokenizerFailsRegistration(@TempDir Path empty) throws IOException {
        Files.writeString(empty.resolve("config.json"), "{}");
        TokenizerException e =
                assertThrows(TokenizerException.class, () -> ScorchFunctions.register(spark, empty.toString()));
        assertTrue(e.getMessage().contains(empty.toString()), e.getMessage());
        assertTrue(e.getMessage().contains("no tokenizer"), e.getMessage());
        Path missing = empty.resolve("nope");
        e = assertThrows(TokenizerException.class, () -> ScorchFunctions.register(spark, missing));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
    }

    @Test
    void aBadRowFailsTheQueryNamingTheFunction() {
        String m = failure(spark, "SELECT scorch_detokenize(array(19923, 999999999))");
        assertTrue(m.contains("scorch_detokenize: token id 999999999 at position 1 is outside the vocabulary"), m);
        m = failure(spark, "SELECT scorch_tokenize(42)");
        assertTrue(m.contains("scorch_tokenize: expects a STRING argument"), m);
        m = failure(spark, "SELECT scorch_chat(array(named_struct('role', CAST(NULL AS STRING), 'content', 'hi')))");
        assertTrue(m.contains("scorch_chat: message 0 has no role"), m);
    }

    @Test
    void aTemplateThatRaisesFailsTheQueryNamingTheFunction() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("raising"));
        Files.copy(resource(RES + "tokenizer.json.gz"), dir.resolve("tokenizer.json.gz"));
        ObjectMapper om = new ObjectMapper();
        ObjectNode cfg =
                (ObjectNode) om.readTree(resource(RES + "tokenizer_config.json").toFile());
        cfg.put(
                "chat_template",
                "{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
                        + "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}"
                        + "{{ '<' + m['role'] + '>' + m['content'] }}{% endfor %}");
        om.writeValue(dir.resolve("tokenizer_config.json").toFile(), cfg);
        // A session of its own, so the main session's functions stay as they are.
        SparkSession other = spark.newSession();
        TokenizerShipment s = ScorchFunctions.register(other, dir);
        try {
            assertNotEquals(shipment.contentHash(), s.contentHash());
            assertEquals(List.of("tokenizer.json.gz", "tokenizer_config.json"), s.fileNames());
            assertEquals(
                    "<user>hi",
                    other.sql("SELECT scorch_chat(array(named_struct('role', 'user', 'content', 'hi')))")
                            .first()
                            .getString(0));
            String m = failure(other, "SELECT scorch_chat(array(named_struct('role', 'tool', 'content', 'x')))");
            assertTrue(m.contains("scorch_chat: chat template raised"), m);
            assertTrue(m.contains("Only user and assistant roles are supported!"), m);
        } finally {
            ExecutorTokenizerCache.evict(s.contentHash());
            s.destroy();
        }
        // The main session still renders DeepSeek's template.
        assertEquals(
                expected.get("chats").get(0).get("rendered").asText(),
                spark.sql("SELECT scorch_chat(array(named_struct('role', 'user', 'content', 'What is 2+2?')))")
                        .first()
                        .getString(0));
    }

    /** A copy of the DeepSeek-V3 tokenizer folder with {@code template} as its chat template. */
    static Path withTemplate(String name, String template) throws IOException {
        Path dir = Files.createDirectories(tmp.resolve(name));
        Files.copy(resource(RES + "tokenizer.json.gz"), dir.resolve("tokenizer.json.gz"));
        ObjectMapper om = new ObjectMapper();
        ObjectNode cfg =
                (ObjectNode) om.readTree(resource(RES + "tokenizer_config.json").toFile());
        cfg.put("chat_template", template);
        om.writeValue(dir.resolve("tokenizer_config.json").toFile(), cfg);
        return dir;
    }

    static String chatOf(String content) {
        return "SELECT scorch_chat(array(named_struct('role', 'user', 'content', '" + content + "')))";
    }

    /**
     * A checkpoint's template that overflows the stack or loops for ever fails its query with what it hit, in
     * bounded time, and the executor lives on (issue 24, item 6-7: a StackOverflowError in a task made Spark
     * exit the JVM with code 50; three nested range(1000) took 26 s a row). Rows the template renders still
     * render.
     */
    @Test
    void aHostileTemplateFailsItsQueryNotTheExecutor() throws IOException {
        // Overflows while parsing, whatever the row: 100,000 nested ifs.
        String deep = "{% if true %}".repeat(100_000) + "x" + "{% endif %}".repeat(100_000);
        // Overflows or loops for some rows only: a chain of 5,000 macros, three nested loops of 1,000.
        StringBuilder chain = new StringBuilder();
        for (int i = 0; i < 5000; i++) {
            chain.append("{% macro m")
                    .append(i)
                    .append("() %}")
                    .append(i < 4999 ? "{{ m" + (i + 1) + "() }}" : "")
                    .append("{% endmacro %}");
        }
        String byRow = chain + "{% for m in messages %}{% if m['content'] == 'deep' %}{{ m0() }}{% endif %}"
                + "{% if m['content'] == 'loop' %}{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                + "{% endfor %}{% endfor %}{% endfor %}{% endif %}{{ '<' + m['role'] + '>' + m['content'] }}{% endfor %}";
        SparkSession other = spark.newSession();
        TokenizerShipment deepShipment = ScorchFunctions.register(other, withTemplate("deep-template", deep));
        try {
            String m = assertTimeoutPreemptively(Duration.ofMinutes(2), () -> failure(other, chatOf("hi")));
            assertTrue(
                    m.contains(
                            "scorch_chat: chat template overflowed the 4 MiB render stack: it nests or recurses too deeply"),
                    m);
        } finally {
            ExecutorTokenizerCache.evict(deepShipment.contentHash());
            deepShipment.destroy();
        }
        TokenizerShipment s = ScorchFunctions.register(other, withTemplate("by-row-template", byRow));
        try {
            assertEquals("<user>hi", other.sql(chatOf("hi")).first().getString(0));
            String m = assertTimeoutPreemptively(Duration.ofMinutes(2), () -> failure(other, chatOf("deep")));
            assertTrue(m.contains("scorch_chat: chat template overflowed the 4 MiB render stack"), m);
            m = assertTimeoutPreemptively(Duration.ofMinutes(2), () -> failure(other, chatOf("loop")));
            // The loop runs into whichever limit comes first: 5 s of CPU or the allocation budget.
            assertTrue(
                    m.contains("scorch_chat: chat template exceeded the 5 s render time limit")
                            || m.contains("scorch_chat: chat template allocated more than"),
                    m);
            List<Row> rows = other.sql("SELECT c, scorch_chat(array(named_struct('role', 'user', 'content', c))) "
                            + "FROM VALUES ('a'), ('b'), ('c'), ('d') AS t(c) ORDER BY c")
                    .collectAsList();
            assertEquals(
                    List.of("<user>a", "<user>b", "<user>c", "<user>d"),
                    rows.stream().map(r -> r.getString(1)).toList());
        } finally {
            ExecutorTokenizerCache.evict(s.contentHash());
            s.destroy();
        }
        assertTrue(!spark.sparkContext().isStopped());
        assertEquals(
                expected.get("chats").get(0).get("rendered").asText(),
                spark.sql(chatOf("What is 2+2?")).first().getString(0));
    }

    /** The messages of the exception chain a failing query throws, joined. */
    static String failure(SparkSession session, String sql) {
        Exception e = assertThrows(Exception.class, () -> session.sql(sql).collectAsList());
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            sb.append(t).append('\n');
        }
        return sb.toString();
    }
}
