package dev.scorch.jobs.eval;

import static org.apache.spark.sql.functions.col;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The history table under an eval output folder: {@code history/}, Parquet partitioned by run_id, one row per
 * (run, task, metric). Writing a run replaces only that run's partition, so rerunning a run id is idempotent and
 * other runs stay as they are.
 */
public final class History {
    public static final StructType SCHEMA = new StructType()
            .add("run_time", DataTypes.StringType)
            .add("suite", DataTypes.StringType)
            .add("suite_hash", DataTypes.StringType)
            .add("task", DataTypes.StringType)
            .add("kind", DataTypes.StringType)
            .add("metric", DataTypes.StringType)
            .add("value", DataTypes.DoubleType)
            .add("stderr", DataTypes.DoubleType)
            .add("stderr_method", DataTypes.StringType)
            .add("n", DataTypes.LongType)
            .add("errors", DataTypes.LongType)
            .add("higher_is_better", DataTypes.BooleanType)
            .add("tolerance", DataTypes.DoubleType)
            .add("model", DataTypes.StringType)
            .add("model_hash", DataTypes.StringType)
            .add("data_hash", DataTypes.StringType)
            .add("run_id", DataTypes.StringType);

    /** One summary row. */
    public record Entry(
            String runId,
            String runTime,
            String suite,
            String suiteHash,
            String task,
            String kind,
            TaskRun.Metric metric,
            double tolerance,
            String model,
            String modelHash,
            String dataHash) {

        Row toRow() {
            TaskRun.Metric m = metric;
            return RowFactory.create(
                    runTime,
                    suite,
                    suiteHash,
                    task,
                    kind,
                    m.metric(),
                    nanToNull(m.value()),
                    nanToNull(m.stderr()),
                    m.stderrMethod(),
                    m.n(),
                    m.errors(),
                    m.higherIsBetter(),
                    tolerance,
                    model,
                    modelHash,
                    dataHash,
                    runId);
        }

        private static Double nanToNull(double v) {
            return Double.isNaN(v) ? null : v;
        }
    }

    private History() {}

    public static String path(String output) {
        return output.replaceAll("/+$", "") + "/history";
    }

    /** Writes one run's rows, replacing that run's partition only. */
    public static void write(SparkSession spark, String output, List<Entry> entries) {
        List<Row> rows = new ArrayList<>();
        for (Entry e : entries) {
            rows.add(e.toRow());
        }
        spark.createDataFrame(rows, SCHEMA)
                .coalesce(1)
                .write()
                .mode(SaveMode.Overwrite)
                .option("partitionOverwriteMode", "dynamic")
                .partitionBy("run_id")
                .parquet(path(output));
    }

    /** One run's values by "task/metric" (empty when the run is not in the history). */
    public static Map<String, Row> run(SparkSession spark, String output, String runId) throws java.io.IOException {
        Map<String, Row> out = new LinkedHashMap<>();
        org.apache.hadoop.fs.Path p = new org.apache.hadoop.fs.Path(path(output));
        if (!p.getFileSystem(spark.sparkContext().hadoopConfiguration()).exists(p)) {
            return out;
        }
        Dataset<Row> h = spark.read().parquet(path(output)).where(col("run_id").equalTo(runId));
        for (Row r : h.collectAsList()) {
            out.put(r.getAs("task") + "/" + r.getAs("metric"), r);
        }
        return out;
    }
}
