package dev.scorch.udfs.api;

import java.io.Serializable;
import java.util.Iterator;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * The RDD of a pipelined score: every staged row shuffled to the last of N partitions (the last pipeline stage reads
 * them; the others get none), the partition function run on all N at once as a Spark barrier stage, and its rows
 * shuffled again, round-robin over N partitions, for the write. The second shuffle makes the barrier stage a shuffle
 * map stage, the kind Spark reruns as a whole when a task fails: its outputs count only once every task has
 * succeeded, and the rows are written after. (Spark does not rerun a barrier result stage, which may have committed
 * output.) A barrier stage cannot narrow or widen its parents within itself, hence the shuffle in, not a coalesce.
 */
final class PipelineRows {
    private PipelineRows() {}

    static RDD<InternalRow> barrier(
            RDD<InternalRow> staged,
            StructType stagedSchema,
            StructType outSchema,
            int stages,
            FlatMapFunction<Iterator<InternalRow>, InternalRow> fn) {
        RDD<InternalRow> last = keyed(staged.toJavaRDD(), stagedSchema, stages, false)
                .partitionBy(new HashPartitioner(stages)) // key stages-1 lands in partition stages-1
                .values()
                .rdd();
        RDD<InternalRow> scored =
                last.barrier().mapPartitions(new Call(fn), false, ClassTag$.MODULE$.apply(InternalRow.class));
        return keyed(scored.toJavaRDD(), outSchema, stages, true)
                .partitionBy(new HashPartitioner(stages))
                .values()
                .rdd();
    }

    /**
     * Each row as an UnsafeRow of its own (a scan or an engine reuses its row objects), keyed for a shuffle into
     * stages partitions: round-robin, or all to the last.
     */
    private static JavaPairRDD<Integer, InternalRow> keyed(
            JavaRDD<InternalRow> rows, StructType schema, int stages, boolean roundRobin) {
        return rows.mapPartitionsToPair(it -> {
            UnsafeProjection unsafe = UnsafeProjection.create(schema);
            return new Iterator<Tuple2<Integer, InternalRow>>() {
                private long n;

                @Override
                public boolean hasNext() {
                    return it.hasNext();
                }

                @Override
                public Tuple2<Integer, InternalRow> next() {
                    int key = roundRobin ? (int) (n++ % stages) : stages - 1;
                    return new Tuple2<>(key, unsafe.apply(it.next()).copy());
                }
            };
        });
    }

    /** fn as the Scala function a barrier RDD maps with. */
    private static final class Call
            extends AbstractFunction1<scala.collection.Iterator<InternalRow>, scala.collection.Iterator<InternalRow>>
            implements Serializable {
        private final FlatMapFunction<Iterator<InternalRow>, InternalRow> fn;

        Call(FlatMapFunction<Iterator<InternalRow>, InternalRow> fn) {
            this.fn = fn;
        }

        @Override
        public scala.collection.Iterator<InternalRow> apply(scala.collection.Iterator<InternalRow> in) {
            try {
                return CollectionConverters.asScala(fn.call(CollectionConverters.asJava(in)));
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }
}
