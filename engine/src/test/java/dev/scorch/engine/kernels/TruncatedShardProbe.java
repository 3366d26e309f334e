package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.MappedFile;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import java.io.RandomAccessFile;
import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * A child JVM for {@link TruncatedShardTest}: files cut short under their mappings, read by the native decoders and by a
 * model's scoring. Prints key=value lines; a crash (SIGBUS in native code) ends it with 134 before "done".
 */
public final class TruncatedShardProbe {
    private TruncatedShardProbe() {}

    private static void cut(Path f, long size) throws Exception {
        try (RandomAccessFile r = new RandomAccessFile(f.toFile(), "rw")) {
            r.setLength(size);
        }
    }

    private static String outcome(Runnable r) {
        try {
            r.run();
            return "ok";
        } catch (Throwable t) {
            if (!(t instanceof dev.scorch.engine.checkpoint.CheckpointException)) {
                t.printStackTrace(System.out); // where an unexpected error came from, for the test's report
            }
            return t.getClass().getName() + ": " + t.getMessage();
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        DemoModelWriter.Weights weights = DemoModelWriter.Weights.valueOf(args[1].toUpperCase(java.util.Locale.ROOT));
        boolean during = args[2].equals("during");
        System.out.println("native=" + NativeCpu.status() + " guarded=" + NativeCpu.mappedReadsGuarded());

        // The decoders straight on a mapping whose file lost all but its first page.
        if (NativeCpu.available() && NativeCpu.mappedReadsGuarded()) {
            Path f = dir.resolve("cut.bin");
            Files.write(f, new byte[1 << 20]);
            MappedByteBuffer map = MappedFile.map(f).mapping(0, 1 << 20);
            cut(f, 4096);
            float[] dst = new float[64 * 256];
            float[] scales = new float[64 * 2];
            System.out.println("bf16-in-first-page=" + NativeCpu.bf16RowsMapped(map, 0, 256, 4, 256, dst));
            System.out.println("bf16-past-end=" + NativeCpu.bf16RowsMapped(map, 65536, 256, 64, 256, dst));
            System.out.println(
                    "fp8-past-end=" + NativeCpu.fp8RowsMapped(map, 65536, 256, 64, 256, scales, 2, 0, 128, dst));
            // INT4: 64 rows of 256 inputs (32 words, 8 BF16 scales a row); words past the end with scales in the first
            // page,
            // then the other way round: the decoder says which it could not read.
            float[] scratch = new float[64 * 8];
            System.out.println("int4-words-past-end="
                    + NativeCpu.int4RowsMapped(map, 65536, 32, 64, 256, map, 0, DType.BF16, 8, 0, 32, scratch, dst));
            System.out.println("int4-scales-past-end="
                    + NativeCpu.int4RowsMapped(map, 0, 32, 4, 256, map, 65536, DType.BF16, 8, 0, 32, scratch, dst));
            System.out.println("bf16-past-end-again=" + NativeCpu.bf16RowsMapped(map, 131072, 256, 64, 256, dst));
            // Decode's row-dots: 64 rows of 256 inputs against one row of x, past the end, then INT4 words and scales
            // as above.
            float[] x = new float[256];
            float[] y = new float[64];
            System.out.println(
                    "rowdot-bf16-past-end=" + NativeCpu.bf16RowDotMapped(map, 65536, 256, 64, x, x, 1, y, 0, 64));
            if (NativeCpu.bf16()) { // the bf16-parts row-dot (decode in a bf16 precision) reads the same way
                int[] xp = new int[3 * NativeCpu.pairsStride(256)];
                NativeCpu.splitPairs(x, 1, 256, 3, xp);
                System.out.println("rowdot-bf16-pairs-past-end="
                        + NativeCpu.bf16PairsRowDotMapped(map, 65536, 256, 64, xp, 3, 1, y, 0, 64));
            }
            System.out.println("rowdot-fp8-past-end="
                    + NativeCpu.fp8RowDotMapped(map, 65536, 256, 64, 0, scales, 2, 1, 128, x, 1, y, 0, 64));
            float[] rowScratch = new float[4 * (32 + 8)];
            System.out.println("rowdot-int4-words-past-end="
                    + NativeCpu.int4RowDotMapped(
                            map, 65536, 32, 256, 64, map, 0, DType.BF16, 8, 32, rowScratch, x, x, 1, y, 0, 64));
            System.out.println("rowdot-int4-scales-past-end="
                    + NativeCpu.int4RowDotMapped(
                            map, 0, 32, 256, 4, map, 65536, DType.BF16, 8, 32, rowScratch, x, x, 1, y, 0, 64));
        }

        // A model scoring a batch, then the same batch with its last shard cut to half: between the two batches (the
        // pass's first check finds it), or during the second, just before its first matmul with a weight of that shard
        // (its
        // reads fault: in the native decoders where they run).
        Path model = dir.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, weights, true, false, 7).write(model);
        DeepseekV3Model m = DeepseekV3Model.load(model);
        List<ScoreRequest> reqs = new ArrayList<>();
        Random r = new Random(3);
        for (int s = 0; s < 3; s++) {
            int[] tokens = new int[48];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = r.nextInt(DemoPreset.TINY.vocabSize());
            }
            reqs.add(new ScoreRequest(tokens, 1, 0, LogitsMode.NONE));
        }
        Checkpoint ckpt = Checkpoint.open(model);
        List<SafetensorsFile> shards = ckpt.shards();
        Path last = shards.get(shards.size() - 1).path();
        // BF16 and FP8: the last shard cut to half, before the first matmul with a weight in it. INT4: the shard of the
        // first
        // INT4 weight a batch multiplies by, cut at the page its packed words start in (so that its words are what
        // faults).
        boolean int4 = weights == DemoModelWriter.Weights.INT4;
        java.util.function.Predicate<Linear> target = int4
                ? w -> w.format() == Linear.Format.INT4_GROUP
                : w -> ckpt.info(w.name()).file().equals(last);
        java.util.function.Consumer<Linear> cutOne = w -> {
            try {
                if (int4) {
                    dev.scorch.engine.checkpoint.TensorInfo packed = ckpt.info(w.name() + "_packed");
                    Path f = model.resolve(packed.file());
                    System.out.println("cut=" + f.getFileName());
                    cut(f, packed.begin() / 4096 * 4096);
                } else {
                    System.out.println("cut=" + last.getFileName());
                    cut(last, Files.size(last) / 2);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        };
        try (CuttingOps ops = new CuttingOps(2, target, cutOne)) {
            Scorer scorer = new Scorer(m.on(ops));
            System.out.println("first="
                    + outcome(() -> {
                        SequenceScore s = scorer.score(reqs, (int[][]) null).get(0);
                        if (!Double.isFinite(s.sumLogprob())) {
                            throw new IllegalStateException("sum " + s.sumLogprob());
                        }
                    }));
            if (during) {
                ops.armed = true;
            } else {
                cutOne.accept(null);
            }
            System.out.println("second=" + outcome(() -> scorer.score(reqs, (int[][]) null)));
        }
        System.out.println("done");
        System.out.flush();
        System.exit(0);
    }

    /** CpuOps that cuts a shard (once armed) just before the first matmul with a weight the predicate picks. */
    static final class CuttingOps extends CpuOps {
        private final java.util.function.Predicate<Linear> inShard;
        private final java.util.function.Consumer<Linear> cut;
        volatile boolean armed;

        CuttingOps(int threads, java.util.function.Predicate<Linear> inShard, java.util.function.Consumer<Linear> cut) {
            super(threads);
            this.inShard = inShard;
            this.cut = cut;
        }

        private void before(Linear... ws) {
            if (armed) {
                for (Linear w : ws) {
                    if (inShard.test(w)) {
                        armed = false;
                        System.out.println("cut-before=" + w.name() + " " + w.format());
                        cut.accept(w);
                        return;
                    }
                }
            }
        }

        @Override
        public void matmul(float[] x, int m, Linear w, float[] y) {
            before(w);
            super.matmul(x, m, w, y);
        }

        @Override
        public void matmul(float[] x, int m, Linear[] w, float[][] y) {
            before(w);
            super.matmul(x, m, w, y);
        }

        @Override
        public void matmulDecode(float[] x, int m, Linear w, float[] y) {
            before(w);
            super.matmulDecode(x, m, w, y);
        }

        @Override
        public void matmulDecode(float[][] x, int[] m, Linear[] w, float[][] y) {
            before(w);
            super.matmulDecode(x, m, w, y);
        }
    }
}
