package dev.scorch.jobs.cli;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.to_json;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

@Command(
        name = "sql",
        mixinStandardHelpOptions = true,
        description = {
            "Runs one Spark SQL query on local Spark over job outputs and prints the result to stdout:",
            "CSV with a header (arrays, structs and maps as JSON strings) or JSON lines. Nothing else goes",
            "to stdout; Spark's logs go to stderr. Tables: --view NAME=PATH, or Spark's own parquet.`/path`."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch sql --view s=out/scores --limit 10 \\",
            "      \"SELECT id, perplexity FROM s ORDER BY perplexity DESC\"",
            "  bin/scorch sql --view h=out/evals/history --format json \"SELECT * FROM h WHERE metric = 'acc'\"",
            "  bin/scorch sql \"SELECT count(*) AS n, avg(perplexity) AS ppl FROM parquet.`out/scores`\"",
            "",
            "In pandas: pandas.read_csv(io.StringIO(stdout)); json.loads the array columns."
        })
public final class SqlCommand implements Callable<Integer> {
    @Option(
            names = "--view",
            paramLabel = "NAME=PATH",
            description =
                    "A temp view over a Parquet folder (hive partitions read back as"
                            + " columns), or JSON lines when PATH ends in .jsonl/.json or the folder holds part-*.json files. Repeatable.")
    List<String> views = new ArrayList<>();

    @Option(
            names = "--format",
            defaultValue = "csv",
            description = "csv (header, RFC 4180 quoting, nulls empty, complex values as JSON)"
                    + " or json (one object per line, nulls kept). Default: ${DEFAULT-VALUE}.")
    String format;

    @Option(names = "--limit", description = "Print at most N rows. Default: all.")
    Integer limit;

    @Option(names = "--master", defaultValue = "local[*]", description = "Spark master. Default: ${DEFAULT-VALUE}.")
    String master;

    @Parameters(paramLabel = "QUERY", description = "The Spark SQL query.")
    String query;

    private static final Pattern VIEW_NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

    @Override
    public Integer call() throws Exception {
        String fmt = format.toLowerCase(Locale.ROOT);
        if (!fmt.equals("csv") && !fmt.equals("json")) {
            throw new IllegalArgumentException("--format " + format + ": expected csv or json");
        }
        if (limit != null && limit < 0) {
            throw new IllegalArgumentException("--limit must not be negative, got " + limit);
        }
        Map<String, String> viewPaths = parseViews(views);
        SparkSession spark = SparkSession.builder()
                .master(master)
                .appName("scorch sql")
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.session.timeZone", "UTC")
                // run_id=20240101 stays the string it was written as
                .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
                .getOrCreate();
        try {
            Dataset<Row> df = query(spark, viewPaths, query, limit);
            Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
            print(df, fmt, out);
            out.flush();
            return 0;
        } finally {
            spark.stop();
        }
    }

    /** NAME=PATH options as an ordered map; fails on a bad name or a repeated one. */
    static Map<String, String> parseViews(List<String> views) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String v : views) {
            int eq = v.indexOf('=');
            if (eq <= 0 || eq == v.length() - 1) {
                throw new IllegalArgumentException("--view " + v + ": expected NAME=PATH");
            }
            String name = v.substring(0, eq);
            if (!VIEW_NAME.matcher(name).matches()) {
                throw new IllegalArgumentException("--view " + v + ": a view name is letters, digits and _");
            }
            if (out.put(name, v.substring(eq + 1)) != null) {
                throw new IllegalArgumentException("--view " + name + " is given twice");
            }
        }
        return out;
    }

    /** Registers the views on spark and runs the query (at most limit rows when limit is not null). */
    public static Dataset<Row> query(SparkSession spark, Map<String, String> views, String sql, Integer limit) {
        views.forEach((name, path) -> read(spark, path).createOrReplaceTempView(name));
        Dataset<Row> df = spark.sql(sql);
        return limit == null ? df : df.limit(limit);
    }

    /** A Parquet folder, or JSON lines (.jsonl/.json, or a folder of part-*.json files). */
    static Dataset<Row> read(SparkSession spark, String path) {
        return isJson(path) ? spark.read().json(path) : spark.read().parquet(path);
    }

    static boolean isJson(String path) {
        String p = path.toLowerCase(Locale.ROOT);
        if (p.endsWith(".jsonl") || p.endsWith(".json")) {
            return true;
        }
        if (path.contains("://") && !path.startsWith("file:")) {
            return false; // remote folders: Parquet unless the name says otherwise
        }
        Path dir = Path.of(path.startsWith("file:") ? java.net.URI.create(path).getPath() : path);
        if (!Files.isDirectory(dir)) {
            return false;
        }
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(f -> f.getFileName().toString())
                    .anyMatch(n -> n.startsWith("part-") && (n.endsWith(".json") || n.endsWith(".jsonl")));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Writes the rows as CSV (header; complex columns as JSON text) or JSON lines, streaming them partition by partition. */
    public static void print(Dataset<Row> df, String format, Writer out) throws IOException {
        StructField[] fields = df.schema().fields();
        String[] positional = new String[fields.length];
        for (int i = 0; i < fields.length; i++) {
            positional[i] = "c" + i; // a query may repeat a column name
        }
        Dataset<Row> renamed = df.toDF(positional);
        if (format.equals("json")) {
            // One JSON object per row, nulls kept so every line has every column.
            Column[] named = new Column[fields.length];
            for (int i = 0; i < fields.length; i++) {
                named[i] = col(positional[i]).as(fields[i].name());
            }
            Iterator<Row> it = renamed.select(to_json(struct(named), Map.of("ignoreNullFields", "false")))
                    .toLocalIterator();
            while (it.hasNext()) {
                out.write(it.next().getString(0));
                out.write('\n');
            }
            return;
        }
        List<String> header = new ArrayList<>();
        Column[] text = new Column[fields.length];
        for (int i = 0; i < fields.length; i++) {
            header.add(fields[i].name());
            Column c = col(positional[i]);
            text[i] = (isComplex(fields[i].dataType()) ? to_json(c) : c.cast(DataTypes.StringType)).as(positional[i]);
        }
        out.write(csvLine(header));
        Iterator<Row> it = renamed.select(text).toLocalIterator();
        List<String> values = new ArrayList<>(header.size());
        while (it.hasNext()) {
            Row r = it.next();
            values.clear();
            for (int i = 0; i < r.length(); i++) {
                values.add(r.isNullAt(i) ? null : r.getString(i));
            }
            out.write(csvLine(values));
        }
    }

    private static boolean isComplex(DataType t) {
        return t instanceof ArrayType || t instanceof StructType || t instanceof MapType;
    }

    /** One CSV record: a null is an empty field, a value with a comma, quote, CR, LF or an empty string is quoted. */
    static String csvLine(List<String> values) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < values.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            String v = values.get(i);
            if (v == null) {
                continue;
            }
            if (v.isEmpty()
                    || v.indexOf(',') >= 0
                    || v.indexOf('"') >= 0
                    || v.indexOf('\n') >= 0
                    || v.indexOf('\r') >= 0) {
                b.append('"').append(v.replace("\"", "\"\"")).append('"');
            } else {
                b.append(v);
            }
        }
        return b.append('\n').toString();
    }
}
