package dev.scorch.jobs;

import dev.scorch.engine.backend.BackendChoice;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.gpu.cuda.Cuda;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.from_json;
import static org.apache.spark.sql.functions.hash;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.pmod;

import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.udfs.model.BroadcastSource;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.model.SparkFilesSource;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.ArrayList;
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
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The skeleton the score and generate jobs share. {@link #prepare} validates the checkpoint and the output folder
 * before any task runs, reads and normalises the input (id, token_ids, prompt, the job's own columns, _source),
 * drops rows a resumed run already wrote, and ships the weights once per executor. {@link #run} then runs the
 * job's partition function slice by slice: each slice is one Spark job committed on its own, so a killed run
 * loses at most the slice in flight and --resume picks up from there.
 */
public final class PartitionedRun implements AutoCloseable {
  private final SparkSession spark;
  private final JobSpec spec;
  private final ModelInfo info;
  private final String modelLabel;
  private final Dataset<Row> input;
  private final long skipped;
  /** Partitions of the numbered input rows; 0 after a resume's anti-join, which adaptive execution may still re-partition. */
  private final int inputPartitions;
  private final ModelSource source;

  private PartitionedRun(SparkSession spark, JobSpec spec, ModelInfo info, String modelLabel, Dataset<Row> input, long skipped,
      int inputPartitions, ModelSource source) {
    this.spark = spark;
    this.spec = spec;
    this.info = info;
    this.modelLabel = modelLabel;
    this.input = input;
    this.skipped = skipped;
    this.inputPartitions = inputPartitions;
    this.source = source;
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
   * reads them) from the raw input.
   */
  public static PartitionedRun prepare(SparkSession spark, JobSpec spec, Function<Dataset<Row>, List<Column>> extraColumns)
      throws IOException {
    // 1. Validate the checkpoint before anything runs, and describe it for shipping and caching.
    ModelInfo info = ModelInfo.of(spec.model());
    info.validation().orThrow();
    ModelManifest manifest = ModelManifest.of(spec.model());
    String modelLabel = manifest.name() + "@" + manifest.shortHash();

    // 2. Check the output folder: refuse to overwrite unless asked; resume keeps what is there.
    FileSystem fs = new Path(spec.output()).getFileSystem(spark.sparkContext().hadoopConfiguration());
    Path out = new Path(spec.output());
    boolean exists = fs.exists(out);
    if (exists && !spec.overwrite() && !spec.resume()) {
      throw new IllegalArgumentException("--output " + spec.output() + " exists; add --overwrite to replace it or --resume to finish it");
    }
    if (exists && spec.overwrite()) {
      fs.delete(out, true);
      exists = false;
    }

    // 3. Read and normalise the input; on resume, drop the ids already written.
    Dataset<Row> raw = readInput(spark, spec);
    Dataset<Row> input = normalise(spark, spec, raw, extraColumns.apply(raw));
    long skipped = 0;
    int inputPartitions = input.rdd().getNumPartitions(); // planned only: the numbered rows' RDD, no job
    if (exists && spec.resume()) {
      fs.delete(new Path(out, "_temporary"), true); // a killed run's uncommitted task files
      Dataset<Row> done = readDone(spark, spec, input.schema().apply(ScoreSchema.ID).dataType());
      if (done != null) {
        long before = input.count();
        input = input.join(done, input.col(ScoreSchema.ID).eqNullSafe(done.col("done_id")), "left_anti");
        skipped = before - input.count();
        inputPartitions = 0;
      }
    }

    // 4. Ship the weights once per executor.
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    ModelSource source = switch (spec.weights()) {
      case "broadcast" -> BroadcastSource.ship(jsc, spec.model(), manifest);
      case "files" -> SparkFilesSource.ship(spark.sparkContext(), spec.model(), manifest);
      default -> new SharedPathSource(spec.model().toAbsolutePath().toString(), manifest);
    };
    return new PartitionedRun(spark, spec, info, modelLabel, input, skipped, inputPartitions, source);
  }

  /** 5. Runs fn over every partition of every slice (internal rows in, internal rows of outSchema out) and writes. */
  public void run(FlatMapFunction<Iterator<InternalRow>, InternalRow> fn, StructType outSchema) {
    var classic = (org.apache.spark.sql.classic.SparkSession) spark;
    try (ProgressLine progress = ProgressLine.start(spark, input::count)) {
      for (int k = 0; k < spec.slices(); k++) {
        Dataset<Row> slice = spec.slices() == 1 ? input : input.where(pmod(hash(col(ScoreSchema.ID)), lit(spec.slices())).equalTo(k));
        // Internal rows in and out: no Row objects or boxed arrays per token.
        JavaRDD<InternalRow> rows = spread(slice, inputPartitions, spec.partitions()).queryExecution().toRdd().toJavaRDD().mapPartitions(fn);
        write(classic.internalCreateDataFrame(rows.rdd(), outSchema, false), spec);
      }
    }
  }

  /**
   * The rows in the partitions a job asked for: a round-robin shuffle, unless they are known to be in that many already
   * (rowsPartitions; 0: unknown), as one input file on --partitions 1 is, where the shuffle would only write and read
   * them back. A row scores alike in any partition.
   */
  static Dataset<Row> spread(Dataset<Row> rows, int rowsPartitions, int partitions) {
    return rowsPartitions == partitions ? rows : rows.repartition(partitions);
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

  static Dataset<Row> readInput(SparkSession spark, JobSpec spec) {
    String fmt = spec.resolvedInputFormat();
    var reader = spark.read().format(fmt);
    if (fmt.equals("csv")) {
      reader = reader.option("header", "true");
    }
    try {
      return reader.load(spec.input());
    } catch (Exception e) {
      throw new IllegalArgumentException("--input " + spec.input() + ": cannot read as " + fmt + ": " + e.getMessage(), e);
    }
  }

  /**
   * Renames the user's columns to id, token_ids (array&lt;bigint&gt;), prompt, then the extra columns, then _source
   * (file:row), and names each row file:row when the input has no id column.
   */
  static Dataset<Row> normalise(SparkSession spark, JobSpec spec, Dataset<Row> raw, List<Column> extra) {
    List<String> cols = Arrays.asList(raw.columns());
    boolean hasIds = cols.contains(spec.tokenIdsColumn());
    boolean hasText = cols.contains(spec.textColumn());
    boolean hasMessages = spec.messagesColumn() != null && cols.contains(spec.messagesColumn());
    if (!hasIds && !hasText && !hasMessages) {
      throw new IllegalArgumentException("--input " + spec.input() + " has neither a '" + spec.tokenIdsColumn() + "' nor a '"
          + spec.textColumn() + "' column" + (spec.messagesColumn() == null ? "" : " nor a '" + spec.messagesColumn() + "' column")
          + " (columns: " + cols + "); see --token-ids-column and --text-column");
    }
    Column tokenIds = lit(null).cast(new ArrayType(DataTypes.LongType, true));
    if (hasIds) {
      DataType t = raw.schema().apply(spec.tokenIdsColumn()).dataType();
      if (t instanceof ArrayType a && isInteger(a.elementType())) {
        tokenIds = col(spec.tokenIdsColumn()).cast(new ArrayType(DataTypes.LongType, true));
      } else if (t.equals(DataTypes.StringType)) {
        tokenIds = from_json(col(spec.tokenIdsColumn()), new ArrayType(DataTypes.LongType, true)); // CSV: "[1, 2, 3]"
      } else {
        throw new IllegalArgumentException("--input column '" + spec.tokenIdsColumn() + "' has type " + t.simpleString()
            + "; expected array<int> (or a JSON array string in CSV)");
      }
    }
    Column prompt = hasText ? col(spec.textColumn()).cast(DataTypes.StringType) : lit(null).cast(DataTypes.StringType);
    boolean generateIds = !cols.contains(spec.idColumn());
    List<Column> select = new ArrayList<>();
    select.add(generateIds ? lit(null).cast(DataTypes.StringType).as(ScoreSchema.ID) : col(spec.idColumn()).as(ScoreSchema.ID));
    select.add(tokenIds.as(ScoreSchema.TOKEN_IDS));
    select.add(prompt.as(ScoreSchema.PROMPT));
    select.addAll(extra);
    select.add(org.apache.spark.sql.functions.input_file_name().as(ScoreSchema.SOURCE));
    Dataset<Row> staged = raw.select(select.toArray(new Column[0]));
    // Number rows in input order (zipWithIndex: stable for the same files), then name each by file and position.
    int last = select.size() - 1;
    JavaRDD<Row> numbered = staged.javaRDD().zipWithIndex().map(t -> {
      Row r = t._1();
      Object[] v = new Object[r.length()];
      for (int i = 0; i < v.length; i++) {
        v[i] = r.get(i);
      }
      String fileName = r.getString(last) == null ? "" : r.getString(last).replaceAll(".*/", "");
      v[last] = fileName + ":" + t._2();
      if (generateIds) {
        v[0] = v[last];
      }
      return RowFactory.create(v);
    });
    StructType schema = staged.schema();
    if (generateIds) {
      schema = new StructType(schema.fields().clone());
      schema.fields()[0] = new StructField(ScoreSchema.ID, DataTypes.StringType, true, Metadata.empty());
    }
    return spark.createDataFrame(numbered, schema);
  }

  static boolean isInteger(DataType t) {
    return t.equals(DataTypes.IntegerType) || t.equals(DataTypes.LongType) || t.equals(DataTypes.ShortType) || t.equals(DataTypes.ByteType);
  }

  /** The ids already in an output folder (null when it holds no data yet). */
  static Dataset<Row> readDone(SparkSession spark, JobSpec spec, DataType idType) {
    try {
      Dataset<Row> done = spec.outputFormat().equals("parquet") ? spark.read().parquet(spec.output())
          : spark.read().schema(new StructType(new StructField[] {new StructField(ScoreSchema.ID, idType, true, Metadata.empty())}))
              .json(spec.output());
      return done.select(col(ScoreSchema.ID).cast(idType).as("done_id")).distinct();
    } catch (Exception e) {
      if (String.valueOf(e.getMessage()).contains("Unable to infer schema") || String.valueOf(e.getMessage()).contains("PATH_NOT_FOUND")) {
        return null;
      }
      throw e;
    }
  }

  static void write(Dataset<Row> rows, JobSpec spec) {
    var w = rows.write().mode(SaveMode.Append);
    if (spec.outputFormat().equals("parquet")) {
      w.parquet(spec.output());
    } else {
      w.json(spec.output());
    }
  }
}
