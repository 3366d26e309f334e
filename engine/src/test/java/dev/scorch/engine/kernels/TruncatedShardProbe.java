package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.Checkpoint;
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
    boolean fp8 = args[1].equals("fp8");
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
      System.out.println("fp8-past-end=" + NativeCpu.fp8RowsMapped(map, 65536, 256, 64, 256, scales, 2, 0, 128, dst));
      float[] groupScales = new float[64 * 8];
      System.out.println("int4-past-end=" + NativeCpu.int4RowsMapped(map, 65536, 32, 64, 256, groupScales, 0, 8, 0, 32, dst));
      System.out.println("bf16-past-end-again=" + NativeCpu.bf16RowsMapped(map, 131072, 256, 64, 256, dst));
    }

    // A model scoring a batch, then the same batch with its last shard cut to half: between the two batches (the
    // pass's first check finds it), or during the second, just before its first matmul with a weight of that shard (its
    // reads fault: in the native decoders where they run).
    Path model = dir.resolve("model");
    new DemoModelWriter(DemoPreset.TINY, fp8, true, 7).write(model);
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
    Runnable cutLast = () -> {
      try {
        cut(last, Files.size(last) / 2);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    };
    try (CpuOps cpu = new CpuOps(2)) {
      CuttingOps ops = new CuttingOps(cpu, w -> ckpt.info(w.name()).file().equals(last), cutLast);
      Scorer scorer = new Scorer(m, ops);
      System.out.println("first=" + outcome(() -> {
        SequenceScore s = scorer.score(reqs, (int[][]) null).get(0);
        if (!Double.isFinite(s.sumLogprob())) {
          throw new IllegalStateException("sum " + s.sumLogprob());
        }
      }));
      System.out.println("cut=" + last.getFileName());
      if (during) {
        ops.armed = true;
      } else {
        cutLast.run();
      }
      System.out.println("second=" + outcome(() -> scorer.score(reqs, (int[][]) null)));
    }
    System.out.println("done");
    System.out.flush();
    System.exit(0);
  }

  /** CpuOps that cuts the shard (once armed) just before the first matmul with a weight that lies in it. */
  static final class CuttingOps implements Ops {
    private final CpuOps inner;
    private final java.util.function.Predicate<Linear> inShard;
    private final Runnable cut;
    volatile boolean armed;

    CuttingOps(CpuOps inner, java.util.function.Predicate<Linear> inShard, Runnable cut) {
      this.inner = inner;
      this.inShard = inShard;
      this.cut = cut;
    }

    private void before(Linear... ws) {
      if (armed) {
        for (Linear w : ws) {
          if (inShard.test(w)) {
            armed = false;
            cut.run();
            return;
          }
        }
      }
    }

    @Override
    public void matmul(float[] x, int m, Linear w, float[] y) {
      before(w);
      inner.matmul(x, m, w, y);
    }

    @Override
    public void matmul(float[] x, int m, Linear[] w, float[][] y) {
      before(w);
      inner.matmul(x, m, w, y);
    }

    @Override
    public void matmulDecode(float[] x, int m, Linear w, float[] y) {
      before(w);
      inner.matmulDecode(x, m, w, y);
    }

    @Override
    public void matmulDecode(float[][] x, int[] m, Linear[] w, float[][] y) {
      before(w);
      inner.matmulDecode(x, m, w, y);
    }

    @Override
    public void attention(MlaInputs in, float[] out) {
      inner.attention(in, out);
    }

    @Override
    public double logSumExp(float[] x, int off, int n) {
      return inner.logSumExp(x, off, n);
    }

    @Override
    public void siluMul(float[] g, float[] u, int off, int n) {
      inner.siluMul(g, u, off, n);
    }

    @Override
    public void forEachRow(int n, java.util.function.IntConsumer body) {
      inner.forEachRow(n, body);
    }

    @Override
    public int threads() {
      return inner.threads();
    }

    @Override
    public void close() {}
  }
}
