package dev.scorch.jobs;

import static org.apache.spark.sql.functions.coalesce;
import static org.apache.spark.sql.functions.col;
import static org.apache.spark.sql.functions.concat;
import static org.apache.spark.sql.functions.from_json;
import static org.apache.spark.sql.functions.lit;
import static org.apache.spark.sql.functions.substring;
import static org.apache.spark.sql.functions.when;

import dev.scorch.jobs.output.PathGuard;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.URI;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.DataFrameReader;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A job's input, read and normalised: id, token_ids (array&lt;bigint&gt;), prompt, the job's own columns,
 * {@value ScoreSchema#INPUT_ERROR} (why a row cannot run, as read: a malformed record, a token_ids that is not an
 * array of integers) and {@value ScoreSchema#SOURCE}, the row's locator FILE:ROW: its file (relative to the input
 * folder) and its place in that file, 0-based. No split size, partition count or id changes a locator, so --resume
 * keys on it. A row without an id column takes its locator as id.
 *
 * <p>CSV is read as RFC 4180 (quoted fields may hold newlines and doubled quotes); a malformed CSV or JSON record
 * keeps its text in Spark's corrupt-record column and becomes that row's error.
 */
final class JobInput {
    static final String CORRUPT = "_corrupt_record";
    private static final int ERROR_TEXT_CHARS = 200;

    final Dataset<Row> rows;
    /** Rows in each partition of {@link #rows}. */
    final long[] partitionRows;

    private JobInput(Dataset<Row> rows, long[] partitionRows) {
        this.rows = rows;
        this.partitionRows = partitionRows;
    }

    long count() {
        return Arrays.stream(partitionRows).sum();
    }

    static JobInput read(SparkSession spark, JobSpec spec, Function<Dataset<Row>, List<Column>> extraColumns) {
        Dataset<Row> raw = readRaw(spark, spec);
        boolean generateIds = !Arrays.asList(raw.columns()).contains(spec.idColumn());
        return number(spark, spec, stage(spec, raw, extraColumns.apply(raw)), generateIds);
    }

    static Dataset<Row> readRaw(SparkSession spark, JobSpec spec) {
        String fmt = spec.resolvedInputFormat();
        try {
            DataFrameReader reader = spark.read().format(fmt);
            if (fmt.equals("parquet")) {
                return reader.load(spec.input());
            }
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT);
            if (fmt.equals("csv")) {
                reader = reader.option("header", "true")
                        .option("multiLine", "true")
                        .option("escape", "\"");
            }
            StructType schema = reader.load(spec.input()).schema();
            // CSV keeps a malformed record only in a corrupt-record column of the schema it is given.
            if (fmt.equals("csv") && !Arrays.asList(schema.fieldNames()).contains(CORRUPT)) {
                schema = schema.add(CORRUPT, DataTypes.StringType, true);
            }
            // A token_ids that is not an array of integers in every row (one row's floats or nested arrays make the
            // inferred
            // type array<double> or array<string> for all): read it as text, which JSON gives as the value's own JSON,
            // and
            // decide row by row.
            if (fmt.equals("json") && Arrays.asList(schema.fieldNames()).contains(spec.tokenIdsColumn())) {
                DataType t = schema.apply(spec.tokenIdsColumn()).dataType();
                if (!(t instanceof ArrayType a && isInteger(a.elementType()))) {
                    StructField[] fields = schema.fields().clone();
                    int i = schema.fieldIndex(spec.tokenIdsColumn());
                    fields[i] = new StructField(fields[i].name(), DataTypes.StringType, true, Metadata.empty());
                    schema = new StructType(fields);
                }
            }
            return reader.schema(schema).load(spec.input());
        } catch (Exception e) {
            throw new IllegalArgumentException(
                    "--input " + spec.input() + ": cannot read as " + fmt + ": " + e.getMessage(), e);
        }
    }

    /** The job's columns from the raw input, then the row's input error, its file and the file split it was read from. */
    static Dataset<Row> stage(JobSpec spec, Dataset<Row> raw, List<Column> extra) {
        List<String> cols = Arrays.asList(raw.columns());
        boolean hasIds = cols.contains(spec.tokenIdsColumn());
        boolean hasText = cols.contains(spec.textColumn());
        boolean hasMessages = spec.messagesColumn() != null && cols.contains(spec.messagesColumn());
        if (!hasIds && !hasText && !hasMessages) {
            throw new IllegalArgumentException(
                    "--input " + spec.input() + " has neither a '" + spec.tokenIdsColumn() + "' nor a '"
                            + spec.textColumn() + "' column"
                            + (spec.messagesColumn() == null ? "" : " nor a '" + spec.messagesColumn() + "' column")
                            + " (columns: " + cols + "); see --token-ids-column and --text-column");
        }
        ArrayType longs = new ArrayType(DataTypes.LongType, true);
        Column tokenIds = lit(null).cast(longs);
        Column tokenIdsError = lit(null).cast(DataTypes.StringType);
        if (hasIds) {
            Column given = col(spec.tokenIdsColumn());
            DataType t = raw.schema().apply(spec.tokenIdsColumn()).dataType();
            if (t instanceof ArrayType a && isInteger(a.elementType())) {
                tokenIds = given.cast(longs);
            } else if (t.equals(DataTypes.StringType)) {
                tokenIds = from_json(
                        given, longs); // CSV: "[1, 2, 3]"; JSON: the text of a value that is not an array of integers
                tokenIdsError = when(
                        given.isNotNull().and(tokenIds.isNull()),
                        concat(
                                lit(spec.tokenIdsColumn() + " is not an array of integers: "),
                                substring(given, 1, ERROR_TEXT_CHARS)));
            } else {
                throw new IllegalArgumentException("--input column '" + spec.tokenIdsColumn() + "' has type "
                        + t.simpleString() + "; expected array<int> (or a JSON array string in CSV)");
            }
        }
        Column inputError = tokenIdsError;
        if (cols.contains(CORRUPT)) {
            String what = spec.resolvedInputFormat().equals("csv") ? "CSV" : "JSON";
            inputError = coalesce(
                    when(
                            col(CORRUPT).isNotNull(),
                            concat(
                                    lit("malformed " + what + " record: "),
                                    substring(col(CORRUPT), 1, ERROR_TEXT_CHARS))),
                    tokenIdsError);
        }
        Column prompt = hasText
                ? col(spec.textColumn()).cast(DataTypes.StringType)
                : lit(null).cast(DataTypes.StringType);
        if (hasText && spec.resolvedInputFormat().equals("csv")) {
            // CSV reads an empty field as null: such a text row's error is its empty prompt, not "token_ids is null".
            Column noPrompt = tokenIds.isNull().and(prompt.isNull());
            if (hasMessages) {
                noPrompt = noPrompt.and(col(spec.messagesColumn()).isNull());
            }
            inputError = coalesce(inputError, when(noPrompt, lit(spec.textColumn() + " is empty")));
        }
        boolean generateIds = !cols.contains(spec.idColumn());
        List<Column> select = new ArrayList<>();
        select.add(
                generateIds
                        ? lit(null).cast(DataTypes.StringType).as(ScoreSchema.ID)
                        : col(spec.idColumn()).as(ScoreSchema.ID));
        select.add(tokenIds.as(ScoreSchema.TOKEN_IDS));
        select.add(prompt.as(ScoreSchema.PROMPT));
        select.addAll(extra);
        select.add(inputError.as(ScoreSchema.INPUT_ERROR));
        select.add(col("_metadata.file_path").as("_file"));
        select.add(col("_metadata.file_block_start").as("_block"));
        return raw.select(select.toArray(new Column[0]));
    }

    /** One file split's rows in one partition, in read order. */
    private record Segment(int partition, String file, long block, long rows) implements Serializable {}

    /**
     * Replaces _file and _block by the locator FILE:ROW: one pass counts the rows of each file split, the driver turns the
     * counts into each split's first row in its file, a second pass numbers the rows.
     */
    static JobInput number(SparkSession spark, JobSpec spec, Dataset<Row> staged, boolean generateIds) {
        int fileAt = staged.schema().fieldIndex("_file");
        int blockAt = fileAt + 1;
        JavaRDD<Row> rdd = staged.javaRDD();
        List<Segment> segments = rdd.mapPartitionsWithIndex(
                        (p, it) -> {
                            List<Segment> out = new ArrayList<>();
                            String file = null;
                            long block = -1;
                            long n = 0;
                            while (it.hasNext()) {
                                Row r = it.next();
                                String f = r.getString(fileAt);
                                long b = r.getLong(blockAt);
                                if (n > 0 && !(b == block && Objects.equals(f, file))) {
                                    out.add(new Segment(p, file, block, n));
                                    n = 0;
                                }
                                file = f;
                                block = b;
                                n++;
                            }
                            if (n > 0) {
                                out.add(new Segment(p, file, block, n));
                            }
                            return out.iterator();
                        },
                        true)
                .collect();

        long[] partitionRows = new long[rdd.getNumPartitions()];
        Map<String, List<Segment>> byFile = new HashMap<>();
        for (Segment s : segments) {
            partitionRows[s.partition()] += s.rows();
            byFile.computeIfAbsent(s.file(), f -> new ArrayList<>()).add(s);
        }
        HashMap<String, Long> firstRow = new HashMap<>(); // file + '\0' + block -> the split's first row in its file
        HashMap<String, String> names = new HashMap<>();
        Path base = inputBase(spark, spec);
        for (Map.Entry<String, List<Segment>> e : byFile.entrySet()) {
            List<Segment> splits = new ArrayList<>(e.getValue());
            splits.sort((a, b) -> Long.compare(a.block(), b.block()));
            long row = 0;
            for (Segment s : splits) {
                firstRow.put(s.file() + '\0' + s.block(), row);
                row += s.rows();
            }
            names.put(e.getKey(), relativeName(base, e.getKey()));
        }

        JavaRDD<Row> numbered = rdd.mapPartitions(
                it -> new Iterator<Row>() {
                    private String key;
                    private long row;

                    @Override
                    public boolean hasNext() {
                        return it.hasNext();
                    }

                    @Override
                    public Row next() {
                        Row r = it.next();
                        String file = r.getString(fileAt);
                        String k = file + '\0' + r.getLong(blockAt);
                        if (!k.equals(key)) {
                            key = k;
                            row = firstRow.get(k);
                        } else {
                            row++;
                        }
                        Object[] v = new Object[fileAt + 1];
                        for (int i = 0; i < fileAt; i++) {
                            v[i] = r.get(i);
                        }
                        v[fileAt] = names.get(file) + ":" + row;
                        if (generateIds) {
                            v[0] = v[fileAt];
                        }
                        return RowFactory.create(v);
                    }
                },
                true);
        StructField[] fields = Arrays.copyOf(staged.schema().fields(), fileAt + 1);
        fields[fileAt] = new StructField(ScoreSchema.SOURCE, DataTypes.StringType, true, Metadata.empty());
        return new JobInput(spark.createDataFrame(numbered, new StructType(fields)), partitionRows);
    }

    /** The folder locators are relative to: the input folder, or the folder of an input file or a glob's fixed part. */
    static Path inputBase(SparkSession spark, JobSpec spec) {
        try {
            Path p = new Path(spec.input());
            FileSystem fs = p.getFileSystem(spark.sparkContext().hadoopConfiguration());
            Path base = fs.makeQualified(PathGuard.globFree(p));
            return fs.exists(base) && fs.getFileStatus(base).isFile() ? base.getParent() : base;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A file's path below base ("/"-separated), or its whole path when it is not below. */
    static String relativeName(Path base, String file) {
        String path;
        try {
            path = new Path(new URI(file)).toUri().getPath();
        } catch (java.net.URISyntaxException e) {
            path = new Path(file).toUri().getPath();
        }
        String prefix = base.toUri().getPath().replaceAll("/+$", "") + "/";
        return path.startsWith(prefix) ? path.substring(prefix.length()) : path;
    }

    static boolean isInteger(DataType t) {
        return t.equals(DataTypes.IntegerType)
                || t.equals(DataTypes.LongType)
                || t.equals(DataTypes.ShortType)
                || t.equals(DataTypes.ByteType);
    }
}
