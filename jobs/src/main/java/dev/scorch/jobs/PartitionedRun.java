package dev.scorch.jobs;

import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.gpu.cuda.Cuda;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.jobs.output.OutputFolder;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.udfs.model.BroadcastSource;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.model.SparkFilesSource;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.function.Function;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * The skeleton the score and generate jobs share. {@link #prepare} validates the checkpoint, reads and checks the input
 * (id, token_ids, prompt, the job's own columns, _input_error, _source: see {@link JobInput}), then opens the output
 * ({@link OutputFolder}: a new run writes beside the old output and replaces it only when it commits), drops the rows a
 * resumed run already wrote, and ships the weights once per executor. {@link #run} then runs the job's partition
 * function slice by slice: each slice is one Spark job committed on its own, so a killed run loses at most the slice in
 * flight and --resume picks up from there.
 */
public final class PartitionedRun implements AutoCloseable {
    private final SparkSession spark;
    private final JobSpec spec;
    private final ModelInfo info;
    private final String modelLabel;
    private final Dataset<Row> input;
    private final long skipped;
    /** Whether the input rows already fill the partitions asked for evenly (never after a resume's anti-join). */
    private final boolean balanced;

    private final ModelSource source;
    private final OutputFolder folder;

    private PartitionedRun(
            SparkSession spark,
            JobSpec spec,
            ModelInfo info,
            String modelLabel,
            Dataset<Row> input,
            long skipped,
            boolean balanced,
            ModelSource source,
            OutputFolder folder) {
        this.spark = spark;
        this.spec = spec;
        this.info = info;
        this.modelLabel = modelLabel;
        this.input = input;
        this.skipped = skipped;
        this.balanced = balanced;
        this.source = source;
        this.folder = folder;
    }

    /**
     * With --backend cuda on a local master, whose tasks run in this JVM, a missing CUDA fails here, before anything
     * runs, naming why. (On a cluster each task decides on its executor.)
     */
    public static void checkBackend(SparkSession spark, BackendMode backend) {
        if (backend == BackendMode.CUDA && spark.sparkContext().isLocal()) {
            BackendChoice.choose(BackendMode.CUDA, List.of(), Cuda::probe);
        }
    }

    /**
     * Steps 1 to 4 of a job. {@code extraColumns} gives the job's own input columns (named as the partition function
     * reads them) from the raw input. The output is touched only after the checkpoint and the input have been read
     * and checked, and never where it could reach a user's own files.
     */
    public static PartitionedRun prepare(
            SparkSession spark, JobSpec spec, Function<Dataset<Row>, List<Column>> extraColumns) throws IOException {
        // 1. Validate the checkpoint before anything runs, and describe it for shipping and caching.
        ModelInfo info = ModelInfo.of(spec.model());
        info.validation().orThrow();
        ModelManifest manifest = ModelManifest.of(spec.model());
        String modelLabel = manifest.name() + "@" + manifest.shortHash();

        // 2. The output: never the input, the model, the root, home or working folder, nor anything Scorch did not
        // write;
        //    a new run goes to a partial folder swapped in when it commits. Nothing is written yet.
        FileSystem fs =
                new Path(spec.output()).getFileSystem(spark.sparkContext().hadoopConfiguration());
        new PathGuard(fs)
                .input("the input", spec.input())
                .input("the model folder", spec.model())
                .check("--output", spec.output());
        ObjectNode describe =
                new ObjectMapper().createObjectNode().put("model", modelLabel).put("input", spec.input());
        OutputFolder folder = OutputFolder.open(fs, spec.output(), spec.job(), spec.write(), describe);

        // 3. Read, check and number the input (every row's locator FILE:ROW); then make the output's folder ready and,
        // on
        //    resume, drop the rows already written.
        JobInput in = JobInput.read(spark, spec, extraColumns);
        folder.start();
        Dataset<Row> input = in.rows;
        long skipped = 0;
        boolean balanced = balanced(in.partitionRows, spec.partitions());
        if (folder.resumesRows()) {
            Dataset<Row> done = readDone(spark, spec, folder.target());
            if (done != null) {
                requireSameInput(done, input, folder.target());
                input = input.join(done, input.col(ScoreSchema.SOURCE).equalTo(done.col("done_source")), "left_anti");
                skipped = in.count() - input.count();
                balanced = false;
            }
        }

        // 4. Ship the weights once per executor.
        JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        ModelSource source = switch (spec.weights()) {
            case "broadcast" -> BroadcastSource.ship(jsc, spec.model(), manifest);
            case "files" -> SparkFilesSource.ship(spark.sparkContext(), spec.model(), manifest);
            default -> new SharedPathSource(spec.model().toAbsolutePath().toString(), manifest);
        };
        return new PartitionedRun(spark, spec, info, modelLabel, input, skipped, balanced, source, folder);
    }

    /**
     * 5. Runs fn over every partition of every slice (internal rows in, internal rows of outSchema out), writes each slice,
     * and puts the finished output in place. A failure leaves the previous output as it was and says where the rows
     * written so far are.
     */
    public void run(FlatMapFunction<Iterator<InternalRow>, InternalRow> fn, StructType outSchema) throws IOException {
        var classic = (org.apache.spark.sql.classic.SparkSession) spark;
        try (ProgressLine progress = ProgressLine.start(spark, input::count)) {
            for (int k = 0; k < spec.slices(); k++) {
                Dataset<Row> slice = spec.slices() == 1
                        ? input
                        : input.where(pmod(hash(col(ScoreSchema.SOURCE)), lit(spec.slices()))
                                .equalTo(k));
                // Internal rows in and out: no Row objects or boxed arrays per token.
                JavaRDD<InternalRow> rows = spread(slice, balanced, spec.partitions())
                        .queryExecution()
                        .toRdd()
                        .toJavaRDD()
                        .mapPartitions(fn);
                write(classic.internalCreateDataFrame(rows.rdd(), outSchema, false), spec, folder.target());
            }
            folder.commit();
        } catch (RuntimeException | IOException e) {
            System.err.println("scorch " + spec.job() + ": " + folder.afterFailure());
            throw e;
        }
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

    public ModelInfo info() {
        return info;
    }

    /** name@hash of the checkpoint, written in every output row. */
    public String modelLabel() {
        return modelLabel;
    }

    public ModelSource source() {
        return source;
    }

    /** The normalised input still to do. */
    public Dataset<Row> input() {
        return input;
    }

    public DataType idType() {
        return input.schema().apply(ScoreSchema.ID).dataType();
    }

    /** Rows a resumed run found already written. */
    public long skipped() {
        return skipped;
    }

    @Override
    public void close() {
        if (source instanceof BroadcastSource b) {
            b.destroy();
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
