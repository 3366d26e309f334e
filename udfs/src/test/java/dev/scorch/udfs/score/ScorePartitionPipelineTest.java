package dev.scorch.udfs.score;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.progress.JobMetrics;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.IntFunction;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A CUDA task that holds several GPUs runs the model as a pipeline over all of them, and its score rows are the
 * one-GPU task's bits. The partition code runs as a task would, given the task's GPU addresses, CUDA said available
 * and HostDevices opened for the ordinals (no GPU here, no Spark scheduler: the GPU-resource plumbing from Spark to
 * {@link dev.scorch.udfs.backend.TaskGpus} is TaskGpusTest's).
 */
class ScorePartitionPipelineTest {
    private static final Path MODEL = Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model");
    private static final Cuda.Availability FOUR_GPUS = new Cuda.Availability(true, 4, "test: HostDevices");

    static ModelSource source;

    @BeforeAll
    static void model() throws IOException {
        source = new SharedPathSource(MODEL.toAbsolutePath().toString(), ModelManifest.of(MODEL));
    }

    @AfterAll
    static void evict() {
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    /** 24 rows of 3 to 40 tokens of the conformance model's 512, and one bad row (a token id out of the vocabulary). */
    static List<InternalRow> rows() {
        Random r = new Random(29);
        List<InternalRow> rows = new ArrayList<>();
        for (int i = 0; i < 25; i++) {
            Object[] ids;
            if (i == 7) {
                ids = new Object[] {5L, 512L, 9L};
            } else {
                ids = new Object[3 + r.nextInt(38)];
                for (int t = 0; t < ids.length; t++) {
                    ids[t] = (long) r.nextInt(512);
                }
            }
            rows.add(new GenericInternalRow(new Object[] {
                (long) i,
                new GenericArrayData(ids),
                null,
                null,
                null,
                UTF8String.fromString("in.jsonl:" + i),
                null,
                null
            }));
        }
        return rows;
    }

    /** The partition's output rows (copied) for a task holding these GPU addresses, devices opened by devices. */
    static List<UnsafeRow> score(ScoreOptions o, List<String> addresses, IntFunction<HostDevice> devices) {
        StructType in = ScoreSchema.input(DataTypes.LongType);
        StructType out = ScoreSchema.output(DataTypes.LongType, o);
        LongAccumulator[] acc = new LongAccumulator[7];
        for (int i = 0; i < acc.length; i++) {
            acc[i] = new LongAccumulator();
        }
        JobMetrics metrics = new JobMetrics(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6]);
        ScorePartition p = new ScorePartition(source, o, in, out, "conformance", metrics, 64L << 20);
        List<UnsafeRow> got = new ArrayList<>();
        for (Iterator<InternalRow> it = p.call(rows().iterator(), null, addresses, () -> FOUR_GPUS, devices);
                it.hasNext(); ) {
            got.add(((UnsafeRow) it.next()).copy());
        }
        return got;
    }

    @Test
    void twoAndThreeGpusRunAPipelineWithTheOneGpuRowsBits() {
        for (GemmPrecision precision : List.of(GemmPrecision.FP32, GemmPrecision.BF16)) {
            // Batches of up to 96 tokens: several rows each, so a pipeline cuts them into micro-batches.
            ScoreOptions o = new ScoreOptions(96, 10, 3, LogitsMode.LAST, 1, BackendMode.AUTO, precision, 1);
            List<Integer> opened = new CopyOnWriteArrayList<>();
            IntFunction<HostDevice> devices = g -> {
                opened.add(g);
                return new HostDevice();
            };
            List<UnsafeRow> one = score(o, List.of("0"), devices);
            assertEquals(25, one.size());
            int error = one.get(0).numFields() - 3; // ..., logits, error, model, source_row
            assertTrue(one.get(0).isNullAt(error), "row 0 scores");
            assertEquals(24, one.stream().filter(r -> r.isNullAt(error)).count(), "every row scores but the bad one");
            assertEquals(
                    "token id 512 at position 1 is outside the vocabulary [0, 512)",
                    one.get(7).getUTF8String(error).toString());

            List<UnsafeRow> two = score(o, List.of("0", "1"), devices);
            List<UnsafeRow> three = score(o, List.of("2", "0", "1"), devices);
            assertEquals(List.of(0, 0, 1, 0, 1, 2), opened, precision + ": one device per GPU, once per GPU set");
            assertEquals(one, two, precision + ": 2 GPUs give the one-GPU rows' bits");
            assertEquals(one, three, precision + ": 3 GPUs give the one-GPU rows' bits");

            // The partitions ran on the executor's cached models: a GpuModel for {0}, pipelines of 2 and 3 stages.
            IntFunction<HostDevice> none = g -> {
                throw new AssertionError("cached: no device opened");
            };
            assertInstanceOf(
                    GpuModel.class,
                    ExecutorModelCache.gpuScorer(source, List.of(0), precision, none)
                            .stages());
            Scorer p2 = ExecutorModelCache.gpuScorer(source, List.of(1, 0), precision, none);
            Scorer p3 = ExecutorModelCache.gpuScorer(source, List.of(0, 1, 2), precision, none);
            assertEquals(
                    2, assertInstanceOf(GpuPipeline.class, p2.stages()).stages().size());
            assertEquals(
                    3, assertInstanceOf(GpuPipeline.class, p3.stages()).stages().size());
            assertArrayEquals(new int[] {1, 1, 1}, ((GpuPipeline) p3.stages()).split());
        }
    }
}
