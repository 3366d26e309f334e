package dev.scorch.udfs.api;

import java.util.function.Supplier;
import org.apache.spark.Dependency;
import org.apache.spark.OneToOneDependency;
import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.reflect.ClassTag$;

/**
 * An RDD made only when Spark first asks for its partitions, which it does when an action runs. A DataFrame's
 * {@code queryExecution().toRdd()} runs Spark jobs at once where adaptive execution plans a shuffle (it materialises
 * the shuffle's stages to plan the rest), so a transform built on it directly would not be lazy; built through this
 * RDD, it runs within the user's action instead. Spark asks for every partition list on the thread that submits the
 * action, before its scheduler sees the job.
 */
final class DeferredRDD extends RDD<InternalRow> {
    private transient Supplier<RDD<InternalRow>> make;
    private RDD<InternalRow> made; // shipped with the tasks, which compute its partitions

    DeferredRDD(SparkContext sc, Supplier<RDD<InternalRow>> make) {
        super(sc, scala.collection.immutable.List$.MODULE$.empty(), ClassTag$.MODULE$.apply(InternalRow.class));
        this.make = make;
    }

    private synchronized RDD<InternalRow> made() {
        if (made == null) {
            made = make.get();
            make = null;
        }
        return made;
    }

    @Override
    public Iterator<InternalRow> compute(Partition split, TaskContext context) {
        return made.iterator(split, context);
    }

    @Override
    public Partition[] getPartitions() {
        return made().partitions();
    }

    @Override
    public Seq<Dependency<?>> getDependencies() {
        Dependency<?> d = new OneToOneDependency<>(made());
        return scala.collection.immutable.List$.MODULE$.<Dependency<?>>empty().$colon$colon(d);
    }
}
