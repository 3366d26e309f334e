package dev.scorch.jobs.score;

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
import dev.scorch.udfs.score.ScoreMetrics;
import dev.scorch.udfs.score.ScoreOptions;
import dev.scorch.udfs.score.ScorePartition;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SaveMode;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The score job: validate the checkpoint and the input on the driver, ship the weights, score every row in
 * mapPartitions, and write one output row per input row. Runs as {@code bin/scorch score} or, on a
 * cluster, as {@code spark-submit --class dev.scorch.jobs.score.ScoreJob scorch-jobs.jar ...}.
 */
public final class ScoreJob {
  private ScoreJob() {}

  public static void main(String[] args) {
    System.exit(dev.scorch.jobs.ScorchCli.commandLine().execute(prepend("score", args)));
  }

  static String[] prepend(String first, String[] rest) {
    String[] out = new String[rest.length + 1];
    out[0] = first;
    System.arraycopy(rest, 0, out, 1, rest.length);
    return out;
  }

  public static ScoreSummary run(SparkSession spark, ScoreSpec spec) throws IOException {
    long t0 = System.nanoTime();
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

    // 3. Read and normalise the input: id, token_ids (array<bigint>), prompt, continuation, _source.
    Dataset<Row> input = normalise(spark, spec, readInput(spark, spec));
    DataType idType = input.schema().apply(ScoreSchema.ID).dataType();

    long skipped = 0;
    if (exists && spec.resume()) {
      fs.delete(new Path(out, "_temporary"), true); // a killed run's uncommitted task files
      Dataset<Row> done = readOutput(spark, spec, idType);
      if (done != null) {
        long before = input.count();
        input = input.join(done, input.col(ScoreSchema.ID).eqNullSafe(done.col("done_id")), "left_anti");
        skipped = before - input.count();
      }
    }

    // 4. Ship the weights once per executor.
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    ModelSource source = switch (spec.weights()) {
      case "broadcast" -> BroadcastSource.ship(jsc, spec.model(), manifest);
      case "files" -> SparkFilesSource.ship(spark.sparkContext(), spec.model(), manifest);
      default -> new SharedPathSource(spec.model().toAbsolutePath().toString(), manifest);
    };

    // 5. Score slice by slice: each slice is one Spark job whose output is committed on its own, so a
    //    killed run loses at most the slice in flight and --resume picks up from there.
    ScoreOptions options = new ScoreOptions(spec.maxBatchTokens(), spec.windowRows(), spec.topK(), spec.logits(), spec.threads());
    StructType outSchema = ScoreSchema.output(idType, options);
    ScoreMetrics metrics = ScoreMetrics.register(spark.sparkContext());
    ScorePartition fn = new ScorePartition(source, options, input.schema(), outSchema, modelLabel, metrics, spec.arrowMemoryBytes());
    org.apache.spark.sql.classic.SparkSession classic = (org.apache.spark.sql.classic.SparkSession) spark;
    Dataset<Row> toScore = input;
    try (ProgressLine progress = ProgressLine.start(spark, toScore::count)) {
      for (int k = 0; k < spec.slices(); k++) {
        Dataset<Row> slice = spec.slices() == 1 ? input : input.where(pmod(hash(col(ScoreSchema.ID)), lit(spec.slices())).equalTo(k));
        // Internal rows in, Arrow-built internal rows out: no Row objects or boxed arrays per token.
        JavaRDD<InternalRow> rows = slice.repartition(spec.partitions()).queryExecution().toRdd().toJavaRDD().mapPartitions(fn);
        Dataset<Row> scored = classic.internalCreateDataFrame(rows.rdd(), outSchema, false);
        write(scored, spec);
      }
    } finally {
      if (source instanceof BroadcastSource b) {
        b.destroy();
      }
    }
    double secs = (System.nanoTime() - t0) / 1e9;
    return new ScoreSummary(metrics.rows().value(), metrics.tokens().value(), metrics.errors().value(), metrics.batches().value(),
        secs, metrics.paddingRatio(), modelLabel, source.mode(), skipped, dev.scorch.engine.runtime.ProcessMemory.peakRssBytes());
  }

  static Dataset<Row> readInput(SparkSession spark, ScoreSpec spec) {
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

  /** Renames the user's columns to the job schema and adds a stable id (file:row) when the input has none. */
  static Dataset<Row> normalise(SparkSession spark, ScoreSpec spec, Dataset<Row> raw) {
    List<String> cols = Arrays.asList(raw.columns());
    boolean hasIds = cols.contains(spec.tokenIdsColumn());
    boolean hasText = cols.contains(spec.textColumn());
    if (!hasIds && !hasText) {
      throw new IllegalArgumentException("--input " + spec.input() + " has neither a '" + spec.tokenIdsColumn() + "' nor a '"
          + spec.textColumn() + "' column (columns: " + cols + "); see --token-ids-column and --text-column");
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
    Column continuation = cols.contains(spec.continuationColumn())
        ? col(spec.continuationColumn()).cast(DataTypes.StringType) : lit(null).cast(DataTypes.StringType);
    Column file = org.apache.spark.sql.functions.input_file_name();
    Dataset<Row> staged = raw.select(
        cols.contains(spec.idColumn()) ? col(spec.idColumn()).as(ScoreSchema.ID) : lit(null).cast(DataTypes.StringType).as(ScoreSchema.ID),
        tokenIds.as(ScoreSchema.TOKEN_IDS), prompt.as(ScoreSchema.PROMPT), continuation.as(ScoreSchema.CONTINUATION),
        file.as("_file"));
    // Number rows in input order (zipWithIndex: stable for the same files), then name each by file and position.
    boolean generateIds = !cols.contains(spec.idColumn());
    StructType schema = ScoreSchema.input(generateIds ? DataTypes.StringType : staged.schema().apply(ScoreSchema.ID).dataType());
    JavaRDD<Row> numbered = staged.javaRDD().zipWithIndex().map(t -> {
      Row r = t._1();
      String fileName = r.getString(4) == null ? "" : r.getString(4).replaceAll(".*/", "");
      String source = fileName + ":" + t._2();
      Object id = generateIds ? source : r.get(0);
      return RowFactory.create(id, r.get(1), r.get(2), r.get(3), source);
    });
    return spark.createDataFrame(numbered, schema);
  }

  static boolean isInteger(DataType t) {
    return t.equals(DataTypes.IntegerType) || t.equals(DataTypes.LongType) || t.equals(DataTypes.ShortType) || t.equals(DataTypes.ByteType);
  }

  /** The ids already in an output folder (null when it holds no data yet). */
  static Dataset<Row> readOutput(SparkSession spark, ScoreSpec spec, DataType idType) {
    try {
      Dataset<Row> done = spec.outputFormat().equals("parquet") ? spark.read().parquet(spec.output())
          : spark.read().schema(new StructType(new StructField[] {new StructField(ScoreSchema.ID, idType, true, org.apache.spark.sql.types.Metadata.empty())})).json(spec.output());
      return done.select(col(ScoreSchema.ID).cast(idType).as("done_id")).distinct();
    } catch (Exception e) {
      if (String.valueOf(e.getMessage()).contains("Unable to infer schema") || String.valueOf(e.getMessage()).contains("PATH_NOT_FOUND")) {
        return null;
      }
      throw e;
    }
  }

  static void write(Dataset<Row> scored, ScoreSpec spec) {
    var w = scored.write().mode(SaveMode.Append);
    if (spec.outputFormat().equals("parquet")) {
      w.parquet(spec.output());
    } else {
      w.json(spec.output());
    }
  }

}
