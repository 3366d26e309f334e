package dev.scorch.engine.kernels;

import java.util.Arrays;

/**
 * The plain, obviously-correct path the CPU kernels are tested against (a test fixture: production code's plain twin
 * is HostDevice): simple loops, one thread, and attention exactly as the reference code writes it — sequences padded to the longest, scores + an additive causal mask combined with the
 * padding mask, softmax in fp32, then × v.
 */
public final class ReferenceOps implements Ops {
    @Override
    public void matmul(float[] x, int m, Linear w, float[] y) {
        PackedGemm.reference(x, m, w, y);
    }

    @Override
    public void matmulDecode(float[] x, int m, Linear w, float[] y) {
        PackedGemm.reference(x, m, w, y);
    }

    @Override
    public void attention(MlaInputs in, float[] out) {
        int batch = in.seqLen().length;
        int tMax = Arrays.stream(in.seqLen()).max().orElse(0);
        int heads = in.heads();
        for (int b = 0; b < batch; b++) {
            // mask[i][j] = 0 where key j is visible to query i (j <= i and j is a real token), else -inf.
            float[][] mask = new float[tMax][tMax];
            for (int i = 0; i < tMax; i++) {
                for (int j = 0; j < tMax; j++) {
                    boolean padded = j >= in.seqLen()[b];
                    mask[i][j] = (j > i || padded) ? Float.NEGATIVE_INFINITY : 0f;
                }
            }
            for (int h = 0; h < heads; h++) {
                for (int i = 0; i < in.seqLen()[b]; i++) {
                    float[] scores = new float[tMax];
                    for (int j = 0; j < tMax; j++) {
                        float s = 0;
                        if (j < in.seqLen()[b]) {
                            float[] q = head(in.q(), in.seqStart()[b] + i, heads, h, in.qHead());
                            float[] kv = head(in.kv(), in.seqStart()[b] + j - in.kvRow0(), heads, h, in.kvHead());
                            for (int d = 0; d < in.qkNope(); d++) {
                                s += q[d] * kv[d];
                            }
                            for (int d = 0; d < in.qkRope(); d++) {
                                s += q[in.qkNope() + d] * in.kPe()[(in.seqStart()[b] + j) * in.qkRope() + d];
                            }
                        }
                        scores[j] = s * in.scale() + mask[i][j];
                    }
                    softmax(scores);
                    int o = ((in.seqStart()[b] + i) * heads + h) * in.vHead();
                    for (int d = 0; d < in.vHead(); d++) {
                        float acc = 0;
                        for (int j = 0; j < in.seqLen()[b]; j++) {
                            acc += scores[j] * in.kv()[in.kvOffset(in.seqStart()[b] + j, h) + in.qkNope() + d];
                        }
                        out[o + d] = acc;
                    }
                }
            }
        }
    }

    private static float[] head(float[] x, int row, int heads, int h, int width) {
        return Arrays.copyOfRange(x, (row * heads + h) * width, (row * heads + h + 1) * width);
    }

    static void softmax(float[] s) {
        float max = Float.NEGATIVE_INFINITY;
        for (float v : s) {
            max = Math.max(max, v);
        }
        float sum = 0;
        for (int i = 0; i < s.length; i++) {
            s[i] = (float) Math.exp(s[i] - max);
            sum += s[i];
        }
        for (int i = 0; i < s.length; i++) {
            s[i] /= sum;
        }
    }

    @Override
    public int threads() {
        return 1;
    }

    @Override
    public void close() {}
}
