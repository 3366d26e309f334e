package dev.scorch.jobs;

import static org.apache.spark.sql.functions.coalesce;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;
import static org.apache.spark.sql.functions.when;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.jobs.output.InputFingerprint;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.OutputLease;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.jobs.output.RunIdentity;
import dev.scorch.udfs.api.CheckedModel;
import dev.scorch.udfs.api.ScorchModel;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The skeleton the score and generate jobs share around {@link ScorchModel}. {@link #prepare} validates the checkpoint,
 * reads and checks the input (id, token_ids, prompt, the job's own columns, _input_error, _source: see {@link JobInput}),
 * ships the weights, checks the job's transform against the input, then opens the output ({@link OutputFolder}: a new
 * run writes beside the old output and replaces it only when it commits) and drops the rows a resumed run already
 * wrote. {@link #run} then writes the transform's rows slice by slice: each slice is one Spark job committed on its
 * own, so a killed run loses at most the slice in flight and --resume picks up from there.
 */
public final class PartitionedRun implements AutoCloseable {
    /** The API's name for the tokens scored; the score job writes them as token_ids. */
    private static final String SCORED_TOKEN_IDS = "scored_token_ids";

    private final SparkSession spark;
    private final JobSpec spec;
    private final ScorchModel model;
    private final BiFunction<ScorchModel, Dataset<Row>, Dataset<Row>> transform;
    private final Dataset<Row> input;
    private final long skipped;
    /** Whether the input rows already fill the partitions asked for evenly (never after a resume's anti-join). */
    private final boolean balanced;

    private final OutputFolder folder;
    private final OutputLease lease;

    private PartitionedRun(
            SparkSession spark,
            JobSpec spec,
            ScorchModel model,
            BiFunction<ScorchModel, Dataset<Row>, Dataset<Row>> transform,
            Dataset<Row> input,
            long skipped,
            boolean balanced,
            OutputFolder folder,
            OutputLease lease) {
        this.spark = spark;
        this.lease = lease;
        this.spec = spec;
        this.model = model;
        this.transform = transform;
        this.input = input;
        this.skipped = skipped;
        this.balanced = balanced;
        this.folder = folder;
    }

    /**
     * With --backend cuda on a local master, whose tasks run in this JVM, a missing CUDA fails here, before anything
     * runs, naming why. (On a cluster each task decides on its executor.)
     */
    public static void checkBackend(SparkSession spark, BackendMode backend) {
        ScorchModel.requireBackend(spark, backend);
    }

    /**
     * Everything before the rows run. {@code extraColumns} gives the job's own input columns (named as the transform
     * reads them) from the raw input; {@code transform} is the job's use of the model (score or generate) on the
     * normalised input. The output is touched only after the checkpoint and the input have been read and checked,
     * and never where it could reach a user's own files.
     */
    public static PartitionedRun prepare(
            SparkSession spark,
            JobSpec spec,
            Function<Dataset<Row>, List<Column>> extraColumns,
            BiFunction<ScorchModel, Dataset<Row>, Dataset<Row>> transform)
            throws IOException {
        // 1. Validate the checkpoint before anything runs, and describe it for shipping and caching.
        CheckedModel checked =
                CheckedModel.of(spec.model(), spark.sparkContext().hadoopConfiguration());

        // 2. The output: never the input, the model, the root, home or working folder, nor anything Scorch did not
        //    write; a new run goes to a partial folder swapped in when it commits. Nothing is written yet.
        FileSystem fs =
                new Path(spec.output()).getFileSystem(spark.sparkContext().hadoopConfiguration());
        PathGuard guard = new PathGuard(fs).input("the input", spec.input());
        if (checked.remote()) {
            guard.input("the model folder", checked.location());
        } else {
            guard.input("the model folder", checked.dir());
        }
        guard.check("--output", spec.output());
        ObjectNode describe = new ObjectMapper()
                .createObjectNode()
                .put("model", checked.label())
                .put("input", spec.input());
        // One writer per output: the lease is held from here until the run ends, before anything is written.
        FileKinds.requireOnlyFilesAndFolders(fs, new Path(spec.output()), "--output", spec.output());
        OutputLease lease = OutputLease.acquire(fs, new Path(spec.output()), spec.job(), leasePolicy(spark));
        try {
            RunIdentity identity = new RunIdentity(
                    checked.label(),
                    checked.manifest().contentHash(),
                    spec.input(),
                    InputFingerprint.of(
                            new Path(spec.input())
                                    .getFileSystem(spark.sparkContext().hadoopConfiguration()),
                            spec.input()),
                    spec.resultOptions());
            OutputFolder folder =
                    OutputFolder.open(fs, spec.output(), spec.job(), spec.write(), describe, identity, lease);
            // On a cluster: an executor to run on, or a bounded wait that names what the executors ask for.
            ExecutorWait.await(spark);
            return prepare(spark, spec, extraColumns, transform, checked, folder, lease);
        } catch (RuntimeException | IOException e) {
            lease.close();
            throw e;
        }
    }

    /** The lease's policy from spark.scorch.output.leaseWait and spark.scorch.output.leaseStaleAfter (seconds). */
    public static OutputLease.Policy leasePolicy(SparkSession spark) {
        // The session's runtime settings: a job started in a JVM whose session already runs (a notebook's, a test's)
        // gets its --lease-wait there, not in the SparkContext's settings.
        var conf = spark.conf();
        OutputLease.Policy d = OutputLease.Policy.DEFAULT;
        return new OutputLease.Policy(
                java.time.Duration.ofSeconds(Long.parseLong(
                        conf.get(LEASE_WAIT, Long.toString(d.waitFor().toSeconds())))),
                java.time.Duration.ofSeconds(Long.parseLong(
                        conf.get(LEASE_STALE_AFTER, Long.toString(d.staleAfter().toSeconds())))),
                d.heartbeat());
    }

    /** Seconds a job waits for another job's lease on its output (default 0: refuse at once); --lease-wait sets it. */
    public static final String LEASE_WAIT = "spark.scorch.output.leaseWait";
    /** Seconds without a heartbeat after which another host's lease is taken for dead (default 120). */
    public static final String LEASE_STALE_AFTER = "spark.scorch.output.leaseStaleAfter";

    private static PartitionedRun prepare(
            SparkSession spark,
            JobSpec spec,
            Function<Dataset<Row>, List<Column>> extraColumns,
            BiFunction<ScorchModel, Dataset<Row>, Dataset<Row>> transform,
            CheckedModel checked,
            OutputFolder folder,
            OutputLease lease)
            throws IOException {
        // 3. Read, check and number the input (every row's locator FILE:ROW; a row without an id is an input error).
        JobInput in = JobInput.read(spark, spec, extraColumns);
        Dataset<Row> input = in.rows.withColumn(
                ScoreSchema.INPUT_ERROR,
                coalesce(col(ScoreSchema.INPUT_ERROR), when(col(ScoreSchema.ID).isNull(), lit("id is null"))));

        // 4. Ship the weights once per executor, and check the transform's columns against the input (no rows run).
        ScorchModel model = ScorchModel.ship(spark, checked, spec.weights());
        try {
            transform.apply(model, input);

            // 5. Make the output's folder ready and, on resume, drop the rows already written.
            folder.start();
            long skipped = 0;
            boolean balanced = balanced(in.partitionRows, spec.partitions());
            if (folder.resumesRows()) {
                Dataset<Row> done = readDone(spark, spec, folder.target());
                if (done != null) {
                    requireSameInput(done, input, folder.target());
                    input = input.join(
                            done, input.col(ScoreSchema.SOURCE).equalTo(done.col("done_source")), "left_anti");
                    skipped = in.count() - input.count();
                    balanced = false;
                }
            }
            return new PartitionedRun(spark, spec, model, transform, input, skipped, balanced, folder, lease);
        } catch (RuntimeException | IOException e) {
            model.close(); // frees broadcast weights
            throw e;
        }
    }

    /**
     * 6. Writes the transform's rows slice by slice (the input's id, the results, the input's locator as source_row),
     * and puts the finished output in place. A failure leaves the previous output as it was and says where the rows
     * written so far are.
     */
    public void run() throws IOException {
        try (ProgressLine progress = ProgressLine.start(spark, input::count)) {
            for (int k = 0; k < spec.slices(); k++) {
                lease.requireHeld(); // a run judged stale and taken over writes no further slice
                Dataset<Row> slice = spec.slices() == 1
                        ? input
                        : input.where(pmod(hash(col(ScoreSchema.SOURCE)), lit(spec.slices()))
                                .equalTo(k));
                write(
                        output(transform.apply(model, spread(slice, balanced, spec.partitions()))),
                        spec,
                        folder.target());
            }
            folder.commit();
        } catch (RuntimeException | IOException e) {
            System.err.println("scorch " + spec.job() + ": " + folder.afterFailure());
            throw e;
        }
    }

    /** A job's output row: the input's id, the transform's result columns, the input's locator. */
    private Dataset<Row> output(Dataset<Row> results) {
        List<Column> cols = new ArrayList<>();
        cols.add(col(ScoreSchema.ID));
        String[] names = results.columns();
        for (int i = input.columns().length; i < names.length; i++) {
            cols.add(col(names[i]).as(names[i].equals(SCORED_TOKEN_IDS) ? ScoreSchema.TOKEN_IDS : names[i]));
        }
        cols.add(col(ScoreSchema.SOURCE).as(ScoreSchema.SOURCE_ROW));
        return results.select(cols.toArray(new Column[0]));
    }

    /**
     * The rows in the partitions a job asked for: as they are when they already fill that many partitions evenly (one
     * input file read as --partitions 1 asks, where a shuffle would only write and read them back), else a round-robin
     * shuffle. A row scores alike in any partition.
     */
    static Dataset<Row> spread(Dataset<Row> rows, boolean balanced, int partitions) {
        return balanced && rows.rdd().getNumPartitions() == partitions ? rows : rows.repartition(partitions);
    }

    /**
     * Whether rows already fill {@code partitions} partitions evenly: that many, none holding more than 10 % (and one row)
     * over an even share. Spark splits files by bytes, so one file can land as 18,556 + 1,444 rows in two partitions.
     */
    static boolean balanced(long[] partitionRows, int partitions) {
        if (partitionRows.length != partitions) {
            return false;
        }
        long total = 0;
        long max = 0;
        for (long n : partitionRows) {
            total += n;
            max = Math.max(max, n);
        }
        double even = (double) total / partitions;
        return max <= even * 1.1 + 1;
    }

    /** The model the job runs, shipped. */
    public ScorchModel model() {
        return model;
    }

    /** The normalised input still to do. */
    public Dataset<Row> input() {
        return input;
    }

    /** Rows a resumed run found already written. */
    public long skipped() {
        return skipped;
    }

    @Override
    public void close() {
        try {
            model.close();
        } finally {
            try {
                lease.close();
            } catch (IOException e) {
                System.err.println(
                        "scorch " + spec.job() + ": could not release the lease on " + spec.output() + ": " + e);
            }
        }
    }

    /** The locators already in an output folder (null when it holds no rows yet). */
    static Dataset<Row> readDone(SparkSession spark, JobSpec spec, Path target) {
        Dataset<Row> done;
        try {
            done = spec.outputFormat().equals("parquet")
                    ? spark.read().parquet(target.toString())
                    : spark.read()
                            .schema(new StructType().add(ScoreSchema.SOURCE_ROW, DataTypes.StringType))
                            .json(target.toString());
        } catch (Exception e) {
            if (String.valueOf(e.getMessage()).contains("Unable to infer schema")
                    || String.valueOf(e.getMessage()).contains("PATH_NOT_FOUND")) {
                return null;
            }
            throw e;
        }
        if (!Arrays.asList(done.columns()).contains(ScoreSchema.SOURCE_ROW)
                || !done.where(col(ScoreSchema.SOURCE_ROW).isNull()).isEmpty()) {
            throw new IllegalArgumentException("--resume: " + target + " has rows without " + ScoreSchema.SOURCE_ROW
                    + " (written by an earlier Scorch), so the rows done cannot be told apart; rerun with --overwrite");
        }
        return done.select(col(ScoreSchema.SOURCE_ROW).as("done_source")).distinct();
    }

    /** A resume must read the input the run started with: every row written must come from a row of it. */
    private static void requireSameInput(Dataset<Row> done, Dataset<Row> input, Path target) {
        Dataset<Row> foreign =
                done.join(input, done.col("done_source").equalTo(input.col(ScoreSchema.SOURCE)), "left_anti");
        List<Row> some = foreign.limit(3).collectAsList();
        if (!some.isEmpty()) {
            throw new IllegalArgumentException(
                    "--resume: " + target + " holds rows of input rows that --input does not have (e.g. "
                            + some.stream().map(r -> r.getString(0)).toList()
                            + "); resume with the input the run started with, or rerun with --overwrite");
        }
    }

    static void write(Dataset<Row> rows, JobSpec spec, Path target) {
        var w = rows.write().mode(SaveMode.Append);
        if (spec.outputFormat().equals("parquet")) {
            w.parquet(target.toString());
        } else {
            w.json(target.toString());
        }
    }
}
