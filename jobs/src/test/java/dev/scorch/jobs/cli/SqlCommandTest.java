package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.jobs.score.SparkTests;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** scorch sql's core: views over Parquet and JSONL folders, CSV with complex columns as JSON text, JSON lines. */
class SqlCommandTest {
    @TempDir
    Path tmp;

    private static final StructType SCHEMA = new StructType()
            .add("id", DataTypes.StringType)
            .add("num_tokens", DataTypes.IntegerType)
            .add("token_logprobs", new ArrayType(DataTypes.FloatType, true))
            .add("perplexity", DataTypes.DoubleType)
            .add("error", DataTypes.StringType);

    private Path writeParquet(SparkSession spark) {
        List<Row> rows = List.of(
                RowFactory.create("a", 3, Arrays.asList(null, -1.5f, -0.25f), 2.5, null),
                RowFactory.create("b, \"quoted\"", 1, Arrays.asList((Float) null), null, null),
                RowFactory.create("c", null, null, null, "token_ids is empty"));
        Path dir = tmp.resolve("scores");
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write().parquet(dir.toString());
        return dir;
    }

    private static String run(SparkSession spark, Map<String, String> views, String sql, Integer limit, String format)
            throws Exception {
        StringWriter out = new StringWriter();
        SqlCommand.print(SqlCommand.query(spark, views, sql, limit), format, out);
        return out.toString();
    }

    @Test
    void csvHasAHeaderQuotesWhereNeededAndRendersArraysAsJson() throws Exception {
        SparkSession spark = SparkTests.spark();
        Path dir = writeParquet(spark);
        String csv = run(spark, Map.of("s", dir.toString()), "SELECT * FROM s ORDER BY id", null, "csv");
        assertEquals(
                String.join(
                        "\n",
                        "id,num_tokens,token_logprobs,perplexity,error",
                        "a,3,\"[null,-1.5,-0.25]\",2.5,",
                        "\"b, \"\"quoted\"\"\",1,[null],,",
                        "c,,,,token_ids is empty",
                        ""),
                csv);
        assertEquals(
                "id,n\na,3\n",
                run(spark, Map.of("s", dir.toString()), "SELECT id, num_tokens AS n FROM s ORDER BY id", 1, "csv"));
        // Spark's own parquet.`path` works without a view.
        assertEquals("n\n3\n", run(spark, Map.of(), "SELECT count(*) AS n FROM parquet.`" + dir + "`", null, "csv"));
    }

    @Test
    void jsonLinesKeepNullsAndReadJsonlFolders() throws Exception {
        SparkSession spark = SparkTests.spark();
        Path dir = writeParquet(spark);
        String json = run(
                spark,
                Map.of("s", dir.toString()),
                "SELECT id, token_logprobs, error FROM s WHERE id <> 'c' ORDER BY id",
                null,
                "json");
        assertEquals(
                "{\"id\":\"a\",\"token_logprobs\":[null,-1.5,-0.25],\"error\":null}\n"
                        + "{\"id\":\"b, \\\"quoted\\\"\",\"token_logprobs\":[null],\"error\":null}\n",
                json);
        Path jsonl = tmp.resolve("jsonl");
        spark.read().parquet(dir.toString()).coalesce(1).write().json(jsonl.toString());
        assertTrue(SqlCommand.isJson(jsonl.toString()));
        assertFalse(SqlCommand.isJson(dir.toString()));
        assertEquals(
                "id,num_tokens\na,3\n",
                run(spark, Map.of("j", jsonl.toString()), "SELECT id, num_tokens FROM j WHERE id = 'a'", null, "csv"));
        Files.writeString(tmp.resolve("x.jsonl"), "{\"k\":{\"a\":1}}\n");
        assertEquals(
                "k\n\"{\"\"a\"\":1}\"\n",
                run(spark, Map.of("x", tmp.resolve("x.jsonl").toString()), "SELECT k FROM x", null, "csv"));
    }

    @Test
    void badViewsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> SqlCommand.parseViews(List.of("noequals")));
        assertThrows(IllegalArgumentException.class, () -> SqlCommand.parseViews(List.of("bad-name=/x")));
        assertThrows(IllegalArgumentException.class, () -> SqlCommand.parseViews(List.of("a=/x", "a=/y")));
        assertEquals(
                List.of("a", "b"),
                List.copyOf(SqlCommand.parseViews(List.of("a=/x", "b=/y=z")).keySet()));
    }
}
