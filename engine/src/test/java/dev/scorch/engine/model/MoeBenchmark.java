package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.runtime.Workspace;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * One MoE layer forward (router, routed experts, shared expert) of the {@code small} demo model on a batch
 * of tokens. In the model package because {@link Moe} is package-private; not a JUnit test.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(
        value = 1,
        jvmArgsAppend = {"--add-modules=jdk.incubator.vector"})
public class MoeBenchmark {
    /** Tokens in the batch. */
    @Param({"2048"})
    public int tokens;

    /** Expert weights as the demo writer stores them: BF16, or FP8 E4M3 with 128x128 block scales. */
    @Param({"BF16", "FP8"})
    public String dtype;

    /** Engine threads. */
    @Param({"2"})
    public int threads;

    private Path dir;
    private Moe moe;
    private Moe.Scratch scratch;
    private CpuOps ops;
    private float[] x;

    @Setup(Level.Trial)
    public void setUp() throws IOException {
        // The small preset's dims with 2 layers (layer 0 dense, layer 1 MoE) and a 1024-token vocabulary.
        DemoPreset s = DemoPreset.SMALL;
        DemoPreset p = new DemoPreset(
                "moe-bench",
                1024,
                s.hiddenSize(),
                2,
                1,
                s.numAttentionHeads(),
                s.qLoraRank(),
                s.kvLoraRank(),
                s.qkNopeHeadDim(),
                s.qkRopeHeadDim(),
                s.vHeadDim(),
                s.intermediateSize(),
                s.nRoutedExperts(),
                s.numExpertsPerTok(),
                s.moeIntermediateSize(),
                s.nSharedExperts(),
                s.nGroup(),
                s.topkGroup(),
                s.ropeFactor(),
                s.originalMaxPositionEmbeddings(),
                s.maxPositionEmbeddings(),
                s.maxShardBytes());
        // Write the demo checkpoint to a temp dir and open it like DeepseekV3Model.load does.
        dir = Files.createTempDirectory("scorch-moe-bench");
        ModelConfig config = new DemoModelWriter(p, dtype.equals("FP8"), true, 1234).write(dir);
        Checkpoint ckpt = Checkpoint.open(dir);
        CheckpointValidator.validate(config, ckpt).orThrow();
        // Layer 1 is the MoE layer.
        moe = new Moe(new ModelWeights(ckpt, config), 1);
        Workspace ws = new Workspace();
        scratch = new Moe.Scratch(ws, new DenseMlp.Scratch(ws));
        // Hidden states of unit scale, as after the post-attention RMSNorm.
        SplittableRandom rnd = new SplittableRandom(11);
        x = new float[tokens * config.hiddenSize()];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        ops = new CpuOps(threads);
    }

    @Benchmark
    public float[] forward() {
        return moe.forward(x.clone(), tokens, Matmuls.prefill(ops), null, scratch); // x.clone(): forward consumes x
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        ops.close();
        // Remove the checkpoint (mappings stay valid after unlinking on Linux).
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(f);
            }
        }
    }
}
