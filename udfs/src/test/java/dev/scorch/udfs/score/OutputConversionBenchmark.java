package dev.scorch.udfs.score;

import dev.scorch.engine.kernels.LogSoftmax;
import dev.scorch.engine.scoring.BatchScores;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.SequenceScore;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * One window of score results (rows × tokens) turned into the internal rows Spark writes, two ways:
 * row by row (Row objects with boxed Scala sequences through Spark's Row encoder, what Dataset.mapPartitions
 * with Encoders.row does) and through Arrow (vectors filled from the float arrays, read back by Spark as a
 * columnar batch and projected to unsafe rows, what ScorePartition does).
 *
 * <p>Run: {@code dev/jmh --module udfs OutputConversionBenchmark}
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(
        value = 1,
        jvmArgsAppend = {
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-opens=java.base/java.lang=ALL-UNNAMED",
            "--add-opens=java.base/java.util=ALL-UNNAMED"
        })
public class OutputConversionBenchmark {
    @Param({"256"})
    int rows;

    @Param({"32", "512"})
    int tokens;

    @Param({"0", "5"})
    int topK;

    private StructType schema;
    private int[][] ids;
    /** Vocabulary of the made-up logits rows. */
    private static final int VOCAB = 1024;

    private BatchScores batchScores;
    private SequenceScore[] scores; // the same, one object per row, for rowByRow
    private ExpressionEncoder.Serializer<Row> serializer;
    private BufferAllocator allocator;
    private ArrowScoreOutput arrow;
    private VectorSchemaRoot inputIds;
    private UnsafeProjection toUnsafe;

    @Setup(Level.Trial)
    public void setup() {
        ScoreOptions options = new ScoreOptions(4096, rows, topK, LogitsMode.NONE, 1);
        schema = ScoreSchema.output(DataTypes.StringType, options);
        Random r = new Random(1);
        ids = new int[rows][tokens];
        List<ScoreRequest> reqs = new ArrayList<>(rows);
        for (int i = 0; i < rows; i++) {
            for (int k = 0; k < tokens; k++) {
                ids[i][k] = r.nextInt(VOCAB);
            }
            reqs.add(new ScoreRequest(ids[i], 1, topK, LogitsMode.NONE));
        }
        // Each position's scores from a random logits row, as a scorer fills them.
        batchScores = new BatchScores();
        batchScores.reset(reqs, VOCAB);
        float[] row = new float[VOCAB];
        for (int i = 0; i < rows; i++) {
            for (int k = 0; k + 1 < tokens; k++) {
                for (int v = 0; v < VOCAB; v++) {
                    row[v] = (float) r.nextGaussian() * 3;
                }
                batchScores.accept(
                        i,
                        k,
                        LogSoftmax.logSumExp(row, 0, VOCAB),
                        LogSoftmax.argmax(row, 0, VOCAB),
                        row[ids[i][k + 1]],
                        row,
                        0);
            }
        }
        scores = batchScores.toList().toArray(new SequenceScore[0]);
        serializer = ExpressionEncoder.apply(schema).createSerializer();
        allocator = ArrowUtils.rootAllocator().newChildAllocator("bench", 0, 1L << 30);
        arrow = new ArrowScoreOutput(schema, allocator, "demo@000000000000");
        inputIds = VectorSchemaRoot.create(
                ArrowUtils.toArrowSchema(new StructType().add("id", DataTypes.StringType), "UTC", true, false),
                allocator);
        VarCharVector idVec = (VarCharVector) inputIds.getVector(0);
        idVec.allocateNew();
        for (int i = 0; i < rows; i++) {
            idVec.setSafe(i, ("row-" + i).getBytes());
        }
        inputIds.setRowCount(rows);
        toUnsafe = UnsafeProjection.create(schema);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arrow.close();
        inputIds.close();
        allocator.close();
    }

    @Benchmark
    public void rowByRow(Blackhole bh) {
        for (int i = 0; i < rows; i++) {
            SequenceScore s = scores[i];
            List<Object> tokenIds = new ArrayList<>(tokens);
            List<Object> lps = new ArrayList<>(tokens);
            List<Object> top = new ArrayList<>(tokens);
            for (int k = 0; k < tokens; k++) {
                tokenIds.add(ids[i][k]);
                lps.add(Float.isNaN(s.tokenLogprobs()[k]) ? null : s.tokenLogprobs()[k]);
                if (topK > 0) {
                    if (s.topIds()[k] == null) {
                        top.add(null);
                    } else {
                        List<Row> entries = new ArrayList<>(topK);
                        for (int j = 0; j < topK; j++) {
                            entries.add(RowFactory.create(s.topIds()[k][j], s.topLogprobs()[k][j]));
                        }
                        top.add(seq(entries));
                    }
                }
            }
            List<Object> values = new ArrayList<>(List.of("row-" + i, tokens));
            values.add(seq(tokenIds));
            values.add(seq(lps));
            values.add(s.sumLogprob());
            values.add(s.meanLogprob());
            values.add(s.perplexity());
            if (topK > 0) {
                values.add(seq(top));
            }
            values.add(null);
            values.add("demo@000000000000");
            bh.consume(serializer.apply(RowFactory.create(values.toArray())).copy());
        }
    }

    @Benchmark
    public void arrow(Blackhole bh) {
        arrow.reset();
        for (int i = 0; i < rows; i++) {
            arrow.scored(i, inputIds.getVector(0), i, ids[i], batchScores, i);
        }
        ColumnarBatch batch = arrow.finish(rows);
        for (Iterator<InternalRow> it = arrow.rows(batch, schema); it.hasNext(); ) {
            bh.consume(toUnsafe.apply(it.next()).copy());
        }
    }

    static <T> scala.collection.Seq<T> seq(List<T> list) {
        return scala.jdk.javaapi.CollectionConverters.asScala(list);
    }
}
