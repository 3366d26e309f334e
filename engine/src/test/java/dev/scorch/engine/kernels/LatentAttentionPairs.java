package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;

/**
 * A decode step's absorbed attention for one layer at batch 1 (every head of one query row over a cache of LEN
 * tokens), the native kernel reading BF16 kv_b_proj in place and the Java path (each head decoded to fp32, then the
 * vector attention) taking turns in one JVM, one thread: per round the microseconds of each and their ratio, the
 * median round. Shapes default to the small demo model's (16 heads, qk_nope 64, qk_rope 32, v_head 64, kv_lora 256);
 * the native kernel takes GROUP heads a call (over one pass of the cache; default 1).
 *
 * <pre>dev/jmh --main dev.scorch.engine.kernels.LatentAttentionPairs [LEN [ROUNDS [HEADS NOPE ROPE VHEAD RANK [GROUP]]]]</pre>
 */
public final class LatentAttentionPairs {
    private LatentAttentionPairs() {}

    public static void main(String[] args) throws Exception {
        int len = args.length > 0 ? Integer.parseInt(args[0]) : 136;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 11;
        int[] d = args.length > 6
                ? Arrays.stream(args, 2, 7).mapToInt(Integer::parseInt).toArray()
                : new int[] {16, 64, 32, 64, 256};
        int heads = d[0], nope = d[1], rope = d[2], vHead = d[3], rank = d[4];
        int group = args.length > 7 ? Integer.parseInt(args[7]) : 1;
        Linear kvB = weights(heads * (nope + vHead), rank);
        if (!LatentAttention.attendsInPlace(kvB)) {
            System.out.println(
                    "no in-place attention here: " + KernelSelection.current().decodeGemm());
            return;
        }
        int stride = rank + rope;
        float[] cache = GemmTest.randn(len * stride, 2);
        float[] q = GemmTest.randn(heads * (nope + rope), 3);
        float[] out = new float[heads * vHead];
        float scale = 0.1f;
        LatentAttention.Head shape = new LatentAttention.Head(null, 0, nope, rope, vHead, rank, scale);
        LatentAttention.Scratch s = new LatentAttention.Scratch();
        int iters = Math.max(20, 2_000_000 / (heads * len + 1));
        double[][] us = new double[rounds][2];
        for (int r = -1; r < rounds; r++) { // round -1 warms both up
            for (int t = 0; t < 2; t++) {
                boolean nat = (t == 0) == (r % 2 == 0);
                long t0 = System.nanoTime();
                for (int it = 0; it < iters; it++) {
                    for (int h = 0; h < heads; h += nat ? group : 1) {
                        int qOff = h * (nope + rope);
                        if (nat) {
                            LatentAttention.attendInPlace(
                                    kvB,
                                    h,
                                    Math.min(group, heads - h),
                                    shape,
                                    q,
                                    qOff,
                                    cache,
                                    stride,
                                    len,
                                    out,
                                    h * vHead,
                                    s);
                        } else {
                            LatentAttention.Head hd = LatentAttention.head(kvB, h, nope, rope, vHead, scale, true, s);
                            LatentAttention.attendVector(hd, q, qOff, cache, stride, len, out, h * vHead, s);
                        }
                    }
                }
                if (r >= 0) {
                    us[r][nat ? 0 : 1] = (System.nanoTime() - t0) / 1e3 / iters;
                }
            }
        }
        double[] nat = Arrays.stream(us).mapToDouble(v -> v[0]).sorted().toArray();
        double[] java = Arrays.stream(us).mapToDouble(v -> v[1]).sorted().toArray();
        double[] ratio =
                Arrays.stream(us).mapToDouble(v -> v[1] / v[0]).sorted().toArray();
        System.out.printf(
                Locale.ROOT,
                "absorbed attention, %d heads [%d + %d, %d] x %d, cache %d: native in place %.1f us, Java %.1f us a layer "
                        + "(medians); Java / native %.2f (median round; rounds %.2f-%.2f)%n",
                heads,
                nope,
                vHead,
                rank,
                rope,
                len,
                nat[rounds / 2],
                java[rounds / 2],
                ratio[rounds / 2],
                ratio[0],
                ratio[rounds - 1]);
    }

    private static Linear weights(int rows, int rank) throws Exception {
        Path f = Files.createTempDirectory("scorch-attention-pairs").resolve("kv_b_proj.safetensors");
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.addFloats("w", DType.BF16, new long[] {rows, rank}, GemmTest.randn(rows * rank, 1));
        sw.write(f);
        return new Linear(SafetensorsFile.open(f).tensor("w"));
    }
}
