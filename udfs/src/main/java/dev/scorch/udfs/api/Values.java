package dev.scorch.udfs.api;

import dev.scorch.engine.scoring.LogitsMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.sql.SparkSession;

/** Parameter values as maps give them (the Python module's keyword arguments through py4j), checked and named. */
final class Values {
    private Values() {}

    static String name(String what, String v) {
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException(what + " must be a column name, got " + (v == null ? "null" : "''"));
        }
        return v;
    }

    static String string(String key, Object v) {
        if (v instanceof String s) {
            return s;
        }
        throw new IllegalArgumentException(key + ": expected a string, got " + describe(v));
    }

    static int integer(String key, Object v) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            long l = ((Number) v).longValue();
            if (l == (int) l) {
                return (int) l;
            }
        }
        throw new IllegalArgumentException(key + ": expected an int, got " + describe(v));
    }

    static long longValue(String key, Object v) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        throw new IllegalArgumentException(key + ": expected an integer, got " + describe(v));
    }

    static double decimal(String key, Object v) {
        if (v instanceof Number n) {
            return n.doubleValue();
        }
        throw new IllegalArgumentException(key + ": expected a number, got " + describe(v));
    }

    static boolean bool(String key, Object v) {
        if (v instanceof Boolean b) {
            return b;
        }
        throw new IllegalArgumentException(key + ": expected true or false, got " + describe(v));
    }

    static List<String> strings(String key, Object v) {
        List<String> out = new ArrayList<>();
        for (Object o : list(key, v)) {
            out.add(string(key, o));
        }
        return out;
    }

    static List<Integer> integers(String key, Object v) {
        List<Integer> out = new ArrayList<>();
        for (Object o : list(key, v)) {
            out.add(integer(key, o));
        }
        return out;
    }

    private static List<?> list(String key, Object v) {
        if (v instanceof List<?> l) {
            return l;
        }
        if (v instanceof Object[] a) {
            return List.of(a);
        }
        if (v instanceof int[] a) {
            return java.util.Arrays.stream(a).boxed().toList();
        }
        throw new IllegalArgumentException(key + ": expected a list, got " + describe(v));
    }

    static LogitsMode logits(String s) {
        try {
            return LogitsMode.valueOf(s.toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("logits '" + s + "': expected none, last or all");
        }
    }

    /** Engine threads per task: the value given, or spark.task.cpus for 0; either within {@link Bounds#THREADS}. */
    static int threads(SparkSession spark, int given) {
        Bounds.THREADS_OR_DEFAULT.check("threads", given);
        if (given > 0) {
            return given;
        }
        String cpus = spark.sparkContext().getConf().get("spark.task.cpus", "1");
        try {
            return Bounds.THREADS.check("threads (from spark.task.cpus)", Long.parseLong(cpus.trim()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("spark.task.cpus " + cpus + ": expected a whole number", e);
        }
    }

    private static String describe(Object v) {
        return v == null ? "null" : v + " (" + v.getClass().getSimpleName() + ")";
    }
}
