package dev.scorch.jobs.lmeval;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/** A task's split files read with Spark into documents, in file order, with lm-eval's column order and Python values. */
final class TaskDocs {
    private TaskDocs() {}

    /** A split's documents, its files read with Spark one after another, each in its rows' order. */
    static List<Map<String, Object>> readDocs(SparkSession spark, String format, List<Path> files) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Path f : files) {
            String p = f.toString();
            Dataset<Row> df = switch (format) {
                case "parquet" -> spark.read().parquet(p);
                case "csv" ->
                    spark.read()
                            .option("header", "true")
                            .option("inferSchema", "true")
                            .csv(p);
                default ->
                    spark.read().option("multiLine", startsWithBracket(f)).json(p);
            };
            List<String> order = jsonKeyOrder(f, format);
            for (Row r : df.collectAsList()) {
                Map<String, Object> doc = toMap(r);
                if (order != null) {
                    Map<String, Object> ordered = new LinkedHashMap<>();
                    for (String k : order) {
                        if (doc.containsKey(k)) {
                            ordered.put(k, doc.get(k));
                        }
                    }
                    ordered.putAll(doc);
                    doc = ordered;
                }
                out.add(doc);
            }
        }
        return out;
    }

    static boolean startsWithBracket(Path f) {
        try (var in = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
            int c;
            while ((c = in.read()) >= 0) {
                if (!Character.isWhitespace(c)) {
                    return c == '[';
                }
            }
        } catch (IOException e) {
            return false;
        }
        return false;
    }

    /** The keys of a JSON file's first record in file order (Spark sorts inferred JSON columns); null if not JSON. */
    static List<String> jsonKeyOrder(Path f, String format) {
        if (!format.equals("json")) {
            return null;
        }
        try (var in = Files.newBufferedReader(f, StandardCharsets.UTF_8);
                var parser = new com.fasterxml.jackson.databind.ObjectMapper()
                        .getFactory()
                        .createParser(in)) {
            var t = parser.nextToken();
            if (t == com.fasterxml.jackson.core.JsonToken.START_ARRAY) {
                t = parser.nextToken();
            }
            if (t != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
                return null;
            }
            List<String> keys = new ArrayList<>();
            while ((t = parser.nextToken()) == com.fasterxml.jackson.core.JsonToken.FIELD_NAME) {
                keys.add(parser.currentName());
                parser.nextToken();
                parser.skipChildren();
            }
            return keys;
        } catch (IOException e) {
            return null;
        }
    }

    static Map<String, Object> toMap(Row r) {
        Map<String, Object> m = new LinkedHashMap<>();
        String[] names = r.schema().fieldNames();
        for (int i = 0; i < names.length; i++) {
            m.put(names[i], plain(r.isNullAt(i) ? null : r.get(i)));
        }
        return m;
    }

    static Object plain(Object v) {
        if (v instanceof Row row) {
            return toMap(row);
        }
        if (v instanceof scala.collection.Seq<?> seq) {
            List<Object> l = new ArrayList<>();
            for (int i = 0; i < seq.size(); i++) {
                l.add(plain(seq.apply(i)));
            }
            return l;
        }
        if (v instanceof scala.collection.Map<?, ?> sm) {
            Map<Object, Object> out = new LinkedHashMap<>();
            sm.foreach(t -> out.put(t._1(), plain(t._2())));
            return out;
        }
        if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof Float f) {
            return f.doubleValue();
        }
        return v;
    }
}
