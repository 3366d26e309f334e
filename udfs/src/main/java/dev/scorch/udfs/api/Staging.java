package dev.scorch.udfs.api;

import static org.apache.spark.sql.functions.array;
import static org.apache.spark.sql.functions.from_json;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.struct;
import static org.apache.spark.sql.functions.transform;
import static org.apache.spark.sql.functions.when;

import dev.scorch.udfs.generate.GenerateSchema;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The columns a partition engine reads, made from a user's DataFrame by name and type: a column that is absent reads as
 * null, one of a type that cannot be read fails here, on the driver, naming it.
 */
final class Staging {
    private final Dataset<Row> df;
    private final List<String> names;

    Staging(Dataset<Row> df) {
        this.df = df;
        this.names = Arrays.asList(df.columns());
    }

    boolean has(String name) {
        return name != null && names.contains(name);
    }

    /** A top-level column by its exact name (dots and backticks in it included). */
    static Column col(String name) {
        return functions.col("`" + name.replace("`", "``") + "`");
    }

    private DataType type(String name) {
        return df.schema().apply(name).dataType();
    }

    /** Token ids as array&lt;bigint&gt; (from any integer element type), or null where absent. */
    Column tokenIds(String name) {
        ArrayType longs = new ArrayType(DataTypes.LongType, true);
        if (!has(name)) {
            return lit(null).cast(longs);
        }
        DataType t = type(name);
        if (t instanceof ArrayType a && isInteger(a.elementType())) {
            return col(name).cast(longs);
        }
        throw new IllegalArgumentException("column '" + name + "' has type " + t.simpleString()
                + "; token ids must be array<int> or array<bigint>");
    }

    /** A text column as string, or null where absent. */
    Column text(String name) {
        return has(name) ? col(name).cast(DataTypes.StringType) : lit(null).cast(DataTypes.StringType);
    }

    /** A string column the caller named (it must exist and be a string), or null where none is named. */
    Column given(String name, String what) {
        if (name == null) {
            return lit(null).cast(DataTypes.StringType);
        }
        if (!has(name)) {
            throw new IllegalArgumentException(
                    what + " '" + name + "' is not a column of the DataFrame (columns: " + names + ")");
        }
        if (!type(name).equals(DataTypes.StringType)) {
            throw new IllegalArgumentException(
                    what + " '" + name + "' has type " + type(name).simpleString() + "; expected string");
        }
        return col(name);
    }

    /** An integer column the caller named (it must exist and be integral), as int; null where none is named. */
    Column integer(String name, String what) {
        if (name == null) {
            return lit(null).cast(DataTypes.IntegerType);
        }
        if (!has(name)) {
            throw new IllegalArgumentException(
                    what + " '" + name + "' is not a column of the DataFrame (columns: " + names + ")");
        }
        if (!isInteger(type(name))) {
            throw new IllegalArgumentException(
                    what + " '" + name + "' has type " + type(name).simpleString() + "; expected int or bigint");
        }
        return col(name).cast(DataTypes.IntegerType);
    }

    /** Fails unless one of the prompt columns is there. */
    void requireOne(String... columns) {
        for (String c : columns) {
            if (has(c)) {
                return;
            }
        }
        throw new IllegalArgumentException("the DataFrame has none of the columns " + Arrays.toString(columns)
                + " (columns: " + names + "); name yours with the parameters' token ids, text"
                + (columns.length > 2 ? " or messages" : "") + " column");
    }

    /**
     * Chat messages as array&lt;struct&lt;role, content&gt;&gt;: from a JSON array string, or from an array of structs
     * with role and content fields (taken by name: JSON readers order struct fields alphabetically, and a cast would
     * match them by position); null where absent.
     */
    Column messages(String name) {
        ArrayType messagesType = new ArrayType(GenerateSchema.MESSAGE, true);
        if (!has(name)) {
            return lit(null).cast(messagesType);
        }
        DataType t = type(name);
        if (t.equals(DataTypes.StringType)) {
            return from_json(col(name), messagesType);
        }
        if (t instanceof ArrayType a
                && a.elementType() instanceof StructType s
                && Arrays.asList(s.fieldNames()).contains("role")
                && Arrays.asList(s.fieldNames()).contains("content")) {
            return transform(
                    col(name),
                    m -> struct(
                            m.getField("role").cast(DataTypes.StringType).as("role"),
                            m.getField("content").cast(DataTypes.StringType).as("content")));
        }
        throw new IllegalArgumentException("column '" + name + "' has type " + t.simpleString()
                + "; expected array<struct<role: string, content: string>> (or a JSON array string)");
    }

    /** A per-row sampling override in its type (a stop string becomes a one-element array), or null. */
    Column rowParam(RowParam p, boolean read) {
        if (!read || !has(p.column)) {
            return lit(null).cast(p.type);
        }
        return p == RowParam.STOP && type(p.column).equals(DataTypes.StringType)
                ? when(col(p.column).isNotNull(), array(col(p.column)))
                : col(p.column).cast(p.type);
    }

    /** Fails when a result column would take the name of an input column (Spark compares names without case). */
    static void requireFree(List<String> names, List<String> results, String prefixSetter) {
        List<String> clashes = new ArrayList<>();
        for (String r : results) {
            for (String n : names) {
                if (n.toLowerCase(Locale.ROOT).equals(r.toLowerCase(Locale.ROOT))) {
                    clashes.add(n);
                }
            }
        }
        if (!clashes.isEmpty()) {
            throw new IllegalArgumentException("the DataFrame already has column(s) " + clashes
                    + " that results would be added as; give the results a prefix (" + prefixSetter + ")");
        }
    }

    static boolean isInteger(DataType t) {
        return t.equals(DataTypes.IntegerType)
                || t.equals(DataTypes.LongType)
                || t.equals(DataTypes.ShortType)
                || t.equals(DataTypes.ByteType);
    }

    /** The schema with one field made nullable. */
    static StructType nullable(StructType s, String name) {
        StructField[] f = s.fields().clone();
        int i = s.fieldIndex(name);
        f[i] = new StructField(f[i].name(), f[i].dataType(), true, f[i].metadata());
        return new StructType(f);
    }
}
