package dev.scorch.udfs.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuPipeline;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.udfs.generate.GenerateSchema.RowParam;
import dev.scorch.udfs.model.ExecutorModelCache;
import dev.scorch.udfs.model.ModelSource;
import dev.scorch.udfs.model.SharedPathSource;
import dev.scorch.udfs.progress.JobMetrics;
import dev.scorch.udfs.score.ScoreSchema;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.LongAccumulator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A CUDA generate task holding two GPUs decodes on a pipeline over both (each stage's KV caches on its own device), and
 * its rows are the one-GPU task's bits: greedy completions with their log-probs. HostDevices stand in for the GPUs, as
 * in ScorePartitionPipelineTest.
 */
class GeneratePartitionPipelineTest {
    private static final Path MODEL = Path.of("..", "testdata", "conformance", "tiny-k2-bf16", "model");

    static ModelSource source;

    @BeforeAll
    static void model() throws IOException {
        source = new SharedPathSource(MODEL.toAbsolutePath().toString(), ModelManifest.of(MODEL));
    }

    @AfterAll
    static void evict() {
        ExecutorModelCache.evict(source.manifest().contentHash());
    }

    static StructType input() {
        StructType s = new StructType()
                .add(ScoreSchema.ID, DataTypes.LongType, true)
                .add(ScoreSchema.TOKEN_IDS, new ArrayType(DataTypes.LongType, true), true)
                .add(ScoreSchema.PROMPT, DataTypes.StringType, true)
                .add(GenerateSchema.MESSAGES, new ArrayType(GenerateSchema.MESSAGE, true), true)
                .add(ScoreSchema.INPUT_ERROR, DataTypes.StringType, true)
                .add(ScoreSchema.SOURCE, DataTypes.StringType, true);
        for (RowParam p : RowParam.values()) {
            s = s.add(p.column, p.type, true);
        }
        return s;
    }

    /** 6 prompts of 2 to 12 tokens; the other columns null. */
    static List<InternalRow> rows(StructType in) {
        Random r = new Random(290);
        List<InternalRow> rows = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            Object[] ids = new Object[2 + r.nextInt(11)];
            for (int t = 0; t < ids.length; t++) {
                ids[t] = (long) r.nextInt(512);
            }
            Object[] values = new Object[in.size()];
            values[in.fieldIndex(ScoreSchema.ID)] = (long) i;
            values[in.fieldIndex(ScoreSchema.TOKEN_IDS)] = new GenericArrayData(ids);
            values[in.fieldIndex(ScoreSchema.SOURCE)] = UTF8String.fromString("in.jsonl:" + i);
            rows.add(new GenericInternalRow(values));
        }
        return rows;
    }

    static List<UnsafeRow> generate(List<String> addresses) {
        GenerateOptions o = new GenerateOptions(
                SamplingParams.greedy(),
                8,
                List.of(),
                List.of(),
                1,
                true,
                2,
                new GenerateOptions.Limits(64L << 20, 64, 4),
                1,
                BackendMode.AUTO,
                GemmPrecision.FP32,
                null);
        StructType in = input();
        LongAccumulator[] acc = new LongAccumulator[7];
        for (int i = 0; i < acc.length; i++) {
            acc[i] = new LongAccumulator();
        }
        GeneratePartition p = new GeneratePartition(
                source,
                o,
                in,
                GenerateSchema.output(DataTypes.LongType, o),
                "conformance",
                new JobMetrics(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6]));
        List<UnsafeRow> out = new ArrayList<>();
        for (Iterator<InternalRow> it = p.call(
                        rows(in).iterator(),
                        null,
                        addresses,
                        () -> new Cuda.Availability(true, 2, "test: HostDevices"),
                        g -> new HostDevice());
                it.hasNext(); ) {
            out.add(((UnsafeRow) it.next()).copy());
        }
        return out;
    }

    @Test
    void twoGpusGiveTheOneGpuCompletionsBits() {
        List<UnsafeRow> one = generate(List.of("0"));
        List<UnsafeRow> two = generate(List.of("0", "1"));
        assertEquals(6, one.size());
        for (UnsafeRow r : one) {
            assertEquals(8, r.getInt(6), "8 completion tokens (no stop token given)");
        }
        assertEquals(one, two);
        assertInstanceOf(
                GpuPipeline.class,
                ExecutorModelCache.gpuScorer(source, List.of(0, 1), GemmPrecision.FP32, g -> {
                            throw new AssertionError("cached");
                        })
                        .stages());
    }
}
