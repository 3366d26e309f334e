package dev.scorch.udfs.api;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Runs a partition engine (score or generate) over staged rows, the user's columns first and then the columns the engine
 * reads, and puts each result row beside its input row's user columns. The engine sees its own columns under a key, the
 * row's number in the partition, which comes back in its results' first column: it may reorder rows (generate's
 * finish as they finish) and gives {@code perRow} results for each. An input row is kept (copied) until its last
 * result leaves, so the rows kept are those the engine holds: a score window, generate's running sequences.
 */
final class PassThrough implements FlatMapFunction<Iterator<InternalRow>, InternalRow> {
    private final FlatMapFunction<Iterator<InternalRow>, InternalRow> engine;
    private final StructType staged;
    private final int userFields;
    private final StructType engineOutput;
    /** The engine output's fields that become result columns, by index. */
    private final int[] results;

    private final int perRow;

    PassThrough(
            FlatMapFunction<Iterator<InternalRow>, InternalRow> engine,
            StructType staged,
            int userFields,
            StructType engineOutput,
            int[] results,
            int perRow) {
        this.engine = engine;
        this.staged = staged;
        this.userFields = userFields;
        this.engineOutput = engineOutput;
        this.results = results.clone();
        this.perRow = perRow;
    }

    /** A kept input row and how many of its results have yet to come. */
    private static final class Waiting {
        final InternalRow row;
        int left;

        Waiting(InternalRow row, int left) {
            this.row = row;
            this.left = left;
        }
    }

    @Override
    public Iterator<InternalRow> call(Iterator<InternalRow> input) throws Exception {
        Map<Long, Waiting> waiting = new HashMap<>();
        StructField[] fields = staged.fields();
        int engineFields = fields.length - userFields;
        Iterator<InternalRow> engineInput = new Iterator<>() {
            private long next;

            @Override
            public boolean hasNext() {
                return input.hasNext();
            }

            @Override
            public InternalRow next() {
                InternalRow row = input.next().copy(); // Spark reuses the row's buffer
                long key = next++;
                waiting.put(key, new Waiting(row, perRow));
                Object[] v = new Object[1 + engineFields];
                v[0] = key;
                for (int j = 0; j < engineFields; j++) {
                    int i = userFields + j;
                    v[1 + j] = row.isNullAt(i) ? null : row.get(i, fields[i].dataType());
                }
                return new GenericInternalRow(v);
            }
        };
        Iterator<InternalRow> out = engine.call(engineInput);
        UnsafeProjection project = UnsafeProjection.create(
                CollectionConverters.asScala(projection()).toSeq());
        JoinedRow joined = new JoinedRow();
        return new Iterator<>() {
            @Override
            public boolean hasNext() {
                return out.hasNext();
            }

            @Override
            public InternalRow next() {
                InternalRow r = out.next();
                long key = r.getLong(0);
                Waiting w = waiting.get(key);
                if (w == null) {
                    throw new IllegalStateException("the engine returned a row for key " + key + " it was not given"
                            + " (or more than " + perRow + " for it)");
                }
                if (--w.left == 0) {
                    waiting.remove(key);
                }
                return project.apply(joined.apply(w.row, r));
            }
        };
    }

    /** The user's fields of the staged row, then the result fields of the engine's row joined after it. */
    private List<Expression> projection() {
        List<Expression> exprs = new ArrayList<>();
        for (int i = 0; i < userFields; i++) {
            StructField f = staged.fields()[i];
            exprs.add(new BoundReference(i, f.dataType(), f.nullable()));
        }
        int offset = staged.size();
        for (int j : results) {
            StructField f = engineOutput.fields()[j];
            DataType t = f.dataType();
            exprs.add(new BoundReference(offset + j, t, f.nullable()));
        }
        return exprs;
    }
}
