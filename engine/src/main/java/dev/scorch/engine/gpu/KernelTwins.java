package dev.scorch.engine.gpu;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Runs every {@link Device} kernel on the same random inputs on two devices (a GPU and {@link HostDevice}, its
 * plain-loop twin) and reports the largest difference of each kernel's output: the first thing to read when a
 * GPU path disagrees with the CPU.
 */
public final class KernelTwins {
  private KernelTwins() {}

  public static Map<String, Double> compare(Device a, Device b) {
    Map<String, Double> out = new LinkedHashMap<>();
    SplittableRandom rnd = new SplittableRandom(1);
    int m = 37;
    int k = 300;
    int n = 129;
    float[] x = random(rnd, m * k);
    float[] w = random(rnd, n * k);
    for (GemmPrecision p : GemmPrecision.values()) {
      out.put("gemm " + p, diff(a, b, dev -> {
        Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
        dev.gemm(dev.upload(x), m, k, weightOf(dev, w, n, k, p), n, y, p);
        return y;
      }, m * n));
    }
    float[] norm = random(rnd, k);
    out.put("rmsNorm", diff(a, b, dev -> {
      Buf o = dev.alloc(Buf.Kind.F32, (long) m * 200);
      dev.rmsNorm(dev.upload(x), m, k, 50, 200, dev.upload(norm), 1e-6f, o);
      return o;
    }, m * 200));
    int[] positions = new int[m];
    for (int i = 0; i < m; i++) {
      positions[i] = rnd.nextInt(5000);
    }
    float[] cs = random(rnd, 5000 * 32);
    out.put("rope", diff(a, b, dev -> {
      Buf q = dev.upload(x);
      dev.rope(q, m, 3, k, 96, 64, 32, dev.upload(positions), dev.upload(cs));
      return q;
    }, m * k));
    out.put("copyCols", diff(a, b, dev -> {
      Buf o = dev.alloc(Buf.Kind.F32, (long) m * 40);
      dev.copyCols(dev.upload(x), m, k, 7, 33, o, 40, 5);
      return o;
    }, m * 40));
    out.put("add+swiglu", diff(a, b, dev -> {
      Buf g = dev.upload(x);
      dev.add(g, dev.upload(w), (long) m * k);
      Buf o = dev.alloc(Buf.Kind.F32, (long) m * 150);
      dev.swiglu(g, m, 150, o);
      return o;
    }, m * 150));
    int[] rows = {5, 0, 36, 17, 2};
    float[] rw = {0.5f, -1f, 2f, 0.25f, 1f};
    out.put("gather+scatterAdd", diff(a, b, dev -> {
      Buf xs = dev.upload(x);
      Buf r = dev.upload(rows);
      Buf g = dev.alloc(Buf.Kind.F32, 5L * k);
      dev.gatherRows(xs, r, 5, k, g);
      dev.scatterAddRows(xs, r, dev.upload(rw), 5, k, g);
      return xs;
    }, m * k));
    out.put("gather BF16 table", diff(a, b, dev -> {
      Buf g = dev.alloc(Buf.Kind.F32, 5L * k);
      dev.gatherRows(dev.weight(w, GemmPrecision.BF16), dev.upload(rows), 5, k, g);
      return g;
    }, 5 * k));
    // Attention: 2 sequences (20 and 17 tokens), 3 heads, qk_nope 64, qk_rope 32, v_head 64; keys = queries.
    int heads = 3;
    float[] q = random(rnd, m * heads * 96);
    float[] kv = random(rnd, m * heads * 128);
    float[] kPe = random(rnd, m * 32);
    int[] keyStart = new int[m];
    int[] keyLen = new int[m];
    for (int i = 0; i < m; i++) {
      keyStart[i] = i < 20 ? 0 : 20;
      keyLen[i] = i < 20 ? i + 1 : i - 19;
    }
    out.put("mlaAttention", diff(a, b, dev -> {
      Buf o = dev.alloc(Buf.Kind.F32, (long) m * heads * 64);
      dev.mlaAttention(dev.upload(q), dev.upload(kv), dev.upload(kPe), dev.upload(keyStart), dev.upload(keyLen), m, heads, 64, 32, 64,
          0.1f, o);
      return o;
    }, m * heads * 64));
    RouterShape r = new RouterShape(64, 6, 8, 3, true, 2.5f);
    float[] logits = random(rnd, m * 64);
    float[] bias = random(rnd, 64);
    out.put("moeRoute weights", diff(a, b, dev -> {
      Buf e = dev.alloc(Buf.Kind.I32, (long) m * 6);
      Buf wt = dev.alloc(Buf.Kind.F32, (long) m * 6);
      dev.moeRoute(dev.upload(logits), dev.upload(bias), m, r, e, wt);
      return wt;
    }, m * 6));
    out.put("moeRoute experts", intDiff(a, b, dev -> {
      Buf e = dev.alloc(Buf.Kind.I32, (long) m * 6);
      Buf wt = dev.alloc(Buf.Kind.F32, (long) m * 6);
      dev.moeRoute(dev.upload(logits), dev.upload(bias), m, r, e, wt);
      return e;
    }, m * 6));
    int vocab = 5000;
    float[] big = random(rnd, 4 * vocab);
    int[] targets = {3, -1, 4999, 0};
    out.put("logSoftmaxStats", diff(a, b, dev -> {
      Buf s = dev.alloc(Buf.Kind.F32, 12);
      dev.logSoftmaxStats(dev.upload(big), 4, vocab, dev.upload(targets), s);
      return s;
    }, 12));
    return out;
  }

  private static Buf weightOf(Device dev, float[] w, int n, int k, GemmPrecision p) {
    return dev.weight(w, p);
  }

  private static float[] random(SplittableRandom rnd, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) {
      v[i] = (float) (rnd.nextDouble() * 2 - 1);
    }
    return v;
  }

  private static double diff(Device a, Device b, java.util.function.Function<Device, Buf> f, int n) {
    float[] ra = new float[n];
    float[] rb = new float[n];
    a.read(f.apply(a), ra, 0, n);
    b.read(f.apply(b), rb, 0, n);
    double d = 0;
    for (int i = 0; i < n; i++) {
      d = Math.max(d, Math.abs(ra[i] - rb[i]));
    }
    return d;
  }

  private static double intDiff(Device a, Device b, java.util.function.Function<Device, Buf> f, int n) {
    int[] ra = new int[n];
    int[] rb = new int[n];
    a.read(f.apply(a), ra, 0, n);
    b.read(f.apply(b), rb, 0, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
      bad += ra[i] != rb[i] ? 1 : 0;
    }
    return bad;
  }
}
