package dev.scorch.engine.testing;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.Tensor;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.config.RopeScaling;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/**
 * An independent float64 forward of DeepseekV3ForCausalLM, written from the Hugging Face reference code
 * (modeling_deepseek.py) in plain loops, for tests that hold the engine to it. It shares no code with the engine's
 * model, kernels or decoders: weights come from the checkpoint's raw bytes, dequantised here element by element (BF16
 * and F32 bits, F8_E4M3 codes times their block scale, compressed-tensors INT4 words: q = nibble − 8 at bits
 * 4·(j % 8) of word j / 8, times scale[o, j / group_size]), and everything after runs in double. Config fields come
 * from the engine's {@link ModelConfig} reading (what they mean is the reference code's).
 */
public final class Fp64Reference {
    private final ModelConfig c;
    private final Checkpoint ckpt;
    private final Map<String, double[]> cache = new HashMap<>();

    public Fp64Reference(Path dir) {
        this.c = ModelConfig.read(dir.resolve("config.json"));
        this.ckpt = Checkpoint.open(dir);
    }

    public ModelConfig config() {
        return c;
    }

    /** log p(tokens[k + 1] | tokens[0 .. k]) for k in [0, T - 1): the next-token log-probs of one sequence. */
    public double[] nextTokenLogprobs(int[] tokens) {
        double[][] lp = logSoftmax(logits(tokens));
        double[] out = new double[tokens.length - 1];
        for (int k = 0; k + 1 < tokens.length; k++) {
            out[k] = lp[k][tokens[k + 1]];
        }
        return out;
    }

    /** [T][vocab] logits of one sequence at positions 0 .. T - 1. */
    public double[][] logits(int[] tokens) {
        int t = tokens.length;
        int hidden = c.hiddenSize();
        double[] emb = weight("model.embed_tokens.weight");
        double[][] h = new double[t][hidden];
        for (int i = 0; i < t; i++) {
            System.arraycopy(emb, tokens[i] * hidden, h[i], 0, hidden);
        }
        for (int l = 0; l < c.numHiddenLayers(); l++) {
            String p = "model.layers." + l + ".";
            double[][] x = rmsNorm(h, weight(p + "input_layernorm.weight"), c.rmsNormEps());
            add(h, attention(x, p + "self_attn."));
            x = rmsNorm(h, weight(p + "post_attention_layernorm.weight"), c.rmsNormEps());
            add(h, c.isMoeLayer(l) ? moe(x, p + "mlp.") : mlp(x, p + "mlp."));
        }
        double[][] x = rmsNorm(h, weight("model.norm.weight"), c.rmsNormEps());
        return linear(x, "lm_head.weight", c.vocabSize(), hidden);
    }

    private double[][] attention(double[][] x, String a) {
        int t = x.length;
        int hidden = c.hiddenSize();
        int heads = c.numAttentionHeads();
        int nope = c.qkNopeHeadDim();
        int rope = c.qkRopeHeadDim();
        int qDim = nope + rope;
        int vDim = c.vHeadDim();
        int kvLora = c.kvLoraRank();
        double[][] q;
        if (c.hasQLora()) {
            double[][] qa = linear(x, a + "q_a_proj.weight", c.qLoraRank(), hidden);
            q = linear(
                    rmsNorm(qa, weight(a + "q_a_layernorm.weight"), 1e-6),
                    a + "q_b_proj.weight",
                    heads * qDim,
                    c.qLoraRank());
        } else {
            q = linear(x, a + "q_proj.weight", heads * qDim, hidden);
        }
        double[][] ckv = linear(x, a + "kv_a_proj_with_mqa.weight", kvLora + rope, hidden);
        double[][] compressed = new double[t][kvLora];
        double[][] kPe = new double[t][rope];
        for (int i = 0; i < t; i++) {
            System.arraycopy(ckv[i], 0, compressed[i], 0, kvLora);
            System.arraycopy(ckv[i], kvLora, kPe[i], 0, rope);
        }
        double[][] kv = linear(
                rmsNorm(compressed, weight(a + "kv_a_layernorm.weight"), 1e-6),
                a + "kv_b_proj.weight",
                heads * (nope + vDim),
                kvLora);
        double[] invFreq = invFreq();
        double mscale = ropeMscale();
        for (int i = 0; i < t; i++) {
            kPe[i] = rotate(kPe[i], 0, i, invFreq, mscale);
        }
        double scale = Math.pow(qDim, -0.5);
        RopeScaling rs = c.ropeScaling();
        if (rs != null && rs.mscaleAllDim() != 0) {
            double m = yarnMscale(rs.factor(), rs.mscaleAllDim());
            scale *= m * m;
        }
        double[][] out = new double[t][heads * vDim];
        for (int hd = 0; hd < heads; hd++) {
            double[][] qh = new double[t][qDim];
            double[][] kh = new double[t][qDim];
            for (int i = 0; i < t; i++) {
                System.arraycopy(q[i], hd * qDim, qh[i], 0, nope);
                double[] qPe = rotate(q[i], hd * qDim + nope, i, invFreq, mscale);
                System.arraycopy(qPe, 0, qh[i], nope, rope);
                System.arraycopy(kv[i], hd * (nope + vDim), kh[i], 0, nope);
                System.arraycopy(kPe[i], 0, kh[i], nope, rope);
            }
            for (int i = 0; i < t; i++) {
                double[] s = new double[i + 1];
                double max = Double.NEGATIVE_INFINITY;
                for (int j = 0; j <= i; j++) {
                    double d = 0;
                    for (int k = 0; k < qDim; k++) {
                        d += qh[i][k] * kh[j][k];
                    }
                    s[j] = d * scale;
                    max = Math.max(max, s[j]);
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) {
                    s[j] = Math.exp(s[j] - max);
                    sum += s[j];
                }
                for (int j = 0; j <= i; j++) {
                    double pj = s[j] / sum;
                    for (int k = 0; k < vDim; k++) {
                        out[i][hd * vDim + k] += pj * kv[j][hd * (nope + vDim) + nope + k];
                    }
                }
            }
        }
        return linear(out, a + "o_proj.weight", hidden, heads * vDim);
    }

    /**
     * apply_rotary_pos_emb as the reference does it: the rope dims de-interleaved (x[0], x[2], ..., x[1], x[3], ...), then
     * x·cos + rotate_half(x)·sin with cos/sin of position × inv_freq (repeated over both halves) times mscale.
     */
    private double[] rotate(double[] src, int off, int pos, double[] invFreq, double mscale) {
        int d = c.qkRopeHeadDim();
        int half = d / 2;
        double[] x = new double[d];
        for (int i = 0; i < half; i++) {
            x[i] = src[off + 2 * i];
            x[half + i] = src[off + 2 * i + 1];
        }
        double[] out = new double[d];
        for (int j = 0; j < d; j++) {
            double angle = pos * invFreq[j % half];
            double rotated = j < half ? -x[j + half] : x[j - half];
            out[j] = x[j] * Math.cos(angle) * mscale + rotated * Math.sin(angle) * mscale;
        }
        return out;
    }

    /** DeepseekV3YarnRotaryEmbedding's inv_freq (or the plain rotary embedding's without rope_scaling). */
    private double[] invFreq() {
        int d = c.qkRopeHeadDim();
        double base = c.ropeTheta();
        double[] extra = new double[d / 2];
        for (int i = 0; i < d / 2; i++) {
            extra[i] = 1.0 / Math.pow(base, (2.0 * i) / d);
        }
        RopeScaling s = c.ropeScaling();
        if (s == null) {
            return extra;
        }
        int maxPos = s.originalMaxPositionEmbeddings();
        double low =
                Math.max(Math.floor(d * Math.log(maxPos / (s.betaFast() * 2 * Math.PI)) / (2 * Math.log(base))), 0);
        double high =
                Math.min(Math.ceil(d * Math.log(maxPos / (s.betaSlow() * 2 * Math.PI)) / (2 * Math.log(base))), d - 1);
        if (low == high) {
            high += 0.001;
        }
        double[] out = new double[d / 2];
        for (int i = 0; i < d / 2; i++) {
            double ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
            double mask = 1 - ramp;
            double inter = 1.0 / (s.factor() * Math.pow(base, (2.0 * i) / d));
            out[i] = inter * (1 - mask) + extra[i] * mask;
        }
        return out;
    }

    private double ropeMscale() {
        RopeScaling s = c.ropeScaling();
        return s == null ? 1.0 : yarnMscale(s.factor(), s.mscale()) / yarnMscale(s.factor(), s.mscaleAllDim());
    }

    private static double yarnMscale(double scale, double m) {
        return scale <= 1 ? 1.0 : 0.1 * m * Math.log(scale) + 1.0;
    }

    private double[][] mlp(double[][] x, String m) {
        return mlp(x, m, c.intermediateSize());
    }

    private double[][] mlp(double[][] x, String m, int inter) {
        int hidden = c.hiddenSize();
        double[][] g = linear(x, m + "gate_proj.weight", inter, hidden);
        double[][] u = linear(x, m + "up_proj.weight", inter, hidden);
        for (int i = 0; i < x.length; i++) {
            for (int k = 0; k < inter; k++) {
                g[i][k] = g[i][k] / (1 + Math.exp(-g[i][k])) * u[i][k];
            }
        }
        return linear(g, m + "down_proj.weight", hidden, inter);
    }

    /** DeepseekV3MoE with MoEGate's noaux_tc routing: sigmoid scores, group-limited top-k on scores + bias. */
    private double[][] moe(double[][] x, String m) {
        int t = x.length;
        int hidden = c.hiddenSize();
        int n = c.nRoutedExperts();
        int topK = c.numExpertsPerTok();
        int perGroup = n / c.nGroup();
        double[][] logits = linear(x, m + "gate.weight", n, hidden);
        double[] bias = weight(m + "gate.e_score_correction_bias");
        double[][] y = c.nSharedExperts() > 0
                ? mlp(x, m + "shared_experts.", c.moeIntermediateSize() * c.nSharedExperts())
                : new double[t][hidden];
        for (int i = 0; i < t; i++) {
            double[] scores = new double[n];
            double[] choice = new double[n];
            for (int e = 0; e < n; e++) {
                scores[e] = 1 / (1 + Math.exp(-logits[i][e]));
                choice[e] = scores[e] + bias[e];
            }
            double[] groupScore = new double[c.nGroup()];
            for (int g = 0; g < c.nGroup(); g++) {
                double[] top = new double[Math.min(2, perGroup)];
                java.util.Arrays.fill(top, Double.NEGATIVE_INFINITY);
                for (int e = g * perGroup; e < (g + 1) * perGroup; e++) {
                    if (choice[e] > top[0]) {
                        if (top.length > 1) {
                            top[1] = top[0];
                        }
                        top[0] = choice[e];
                    } else if (top.length > 1 && choice[e] > top[1]) {
                        top[1] = choice[e];
                    }
                }
                groupScore[g] = top.length > 1 ? top[0] + top[1] : top[0];
            }
            boolean[] keep = new boolean[c.nGroup()];
            for (int k = 0; k < c.topkGroup(); k++) {
                keep[argmax(groupScore, keep)] = true;
            }
            for (int e = 0; e < n; e++) {
                if (!keep[e / perGroup]) {
                    choice[e] = 0.0;
                }
            }
            boolean[] chosen = new boolean[n];
            int[] experts = new int[topK];
            double[] w = new double[topK];
            double sum = 0;
            for (int k = 0; k < topK; k++) {
                experts[k] = argmax(choice, chosen);
                chosen[experts[k]] = true;
                w[k] = scores[experts[k]];
                sum += w[k];
            }
            double[][] xi = {x[i]};
            for (int k = 0; k < topK; k++) {
                double wk = (topK > 1 && c.normTopkProb() ? w[k] / (sum + 1e-20) : w[k]) * c.routedScalingFactor();
                double[] e = mlp(xi, m + "experts." + experts[k] + ".", c.moeIntermediateSize())[0];
                for (int d = 0; d < hidden; d++) {
                    y[i][d] += wk * e[d];
                }
            }
        }
        return y;
    }

    private static int argmax(double[] v, boolean[] taken) {
        int best = -1;
        for (int i = 0; i < v.length; i++) {
            if (!taken[i] && (best < 0 || v[i] > v[best])) {
                best = i;
            }
        }
        return best;
    }

    private static double[][] rmsNorm(double[][] x, double[] w, double eps) {
        double[][] out = new double[x.length][];
        for (int i = 0; i < x.length; i++) {
            double ss = 0;
            for (double v : x[i]) {
                ss += v * v;
            }
            double r = 1 / Math.sqrt(ss / x[i].length + eps);
            out[i] = new double[x[i].length];
            for (int k = 0; k < x[i].length; k++) {
                out[i][k] = w[k] * (x[i][k] * r);
            }
        }
        return out;
    }

    private static void add(double[][] h, double[][] d) {
        for (int i = 0; i < h.length; i++) {
            for (int k = 0; k < h[i].length; k++) {
                h[i][k] += d[i][k];
            }
        }
    }

    private static double[][] logSoftmax(double[][] z) {
        double[][] out = new double[z.length][];
        for (int i = 0; i < z.length; i++) {
            double max = Double.NEGATIVE_INFINITY;
            for (double v : z[i]) {
                max = Math.max(max, v);
            }
            double sum = 0;
            for (double v : z[i]) {
                sum += Math.exp(v - max);
            }
            double lse = max + Math.log(sum);
            out[i] = new double[z[i].length];
            for (int k = 0; k < z[i].length; k++) {
                out[i][k] = z[i][k] - lse;
            }
        }
        return out;
    }

    /** y = x Wᵀ with W [out, in] dequantised by {@link #weight}. */
    private double[][] linear(double[][] x, String name, int out, int in) {
        double[] w = weight(name);
        if (w.length != (long) out * in) {
            throw new IllegalStateException(name + ": " + w.length + " values for [" + out + ", " + in + "]");
        }
        double[][] y = new double[x.length][out];
        for (int i = 0; i < x.length; i++) {
            for (int o = 0; o < out; o++) {
                double s = 0;
                for (int k = 0; k < in; k++) {
                    s += x[i][k] * w[o * in + k];
                }
                y[i][o] = s;
            }
        }
        return y;
    }

    // ---- weights, dequantised from the raw bytes ----

    /** The text model's tensor named (DeepSeek-V3 name) as stored or dequantised, row-major. */
    public synchronized double[] weight(String name) {
        return cache.computeIfAbsent(name, this::load);
    }

    private double[] load(String name) {
        String file = c.checkpointName(name);
        QuantizationConfig q = c.quantization();
        if (!ckpt.has(file) && ckpt.has(file + "_packed")) {
            return int4(file, q.groupSize());
        }
        Tensor t = ckpt.tensor(file);
        double[] v = raw(t);
        if (t.dtype() == DType.F8_E4M3) {
            String scaleName = file + (q != null && q.compressedTensors() ? "_scale" : "_scale_inv");
            double[] s = raw(ckpt.tensor(scaleName));
            int rows = t.dim(0);
            int cols = t.dim(1);
            int br = q == null ? 128 : q.blockRows();
            int bc = q == null ? 128 : q.blockCols();
            int sc = (cols + bc - 1) / bc;
            for (int r = 0; r < rows; r++) {
                for (int k = 0; k < cols; k++) {
                    v[r * cols + k] *= s[(r / br) * sc + k / bc];
                }
            }
        }
        return v;
    }

    /** compressed-tensors pack_quantized: W[o, j] = (nibble j % 8 of word j / 8 − 8) × scale[o, j / g]; shape from weight_shape. */
    private double[] int4(String file, int g) {
        byte[] shapeBytes = bytes(ckpt.tensor(file + "_shape"));
        ByteBuffer sb = ByteBuffer.wrap(shapeBytes).order(ByteOrder.LITTLE_ENDIAN);
        boolean i64 = ckpt.tensor(file + "_shape").dtype() == DType.I64;
        int out = (int) (i64 ? sb.getLong(0) : sb.getInt(0));
        int in = (int) (i64 ? sb.getLong(8) : sb.getInt(4));
        byte[] packed = bytes(ckpt.tensor(file + "_packed"));
        double[] scale = raw(ckpt.tensor(file + "_scale"));
        int words = (in + 7) / 8;
        int groups = (in + g - 1) / g;
        double[] w = new double[out * in];
        for (int o = 0; o < out; o++) {
            for (int j = 0; j < in; j++) {
                int at = 4 * (o * words + j / 8);
                int word = (packed[at] & 0xFF)
                        | (packed[at + 1] & 0xFF) << 8
                        | (packed[at + 2] & 0xFF) << 16
                        | (packed[at + 3] & 0xFF) << 24;
                int q = ((word >>> (4 * (j % 8))) & 0xF) - 8;
                w[o * in + j] = q * scale[o * groups + j / g];
            }
        }
        return w;
    }

    private static byte[] bytes(Tensor t) {
        ByteBuffer b = t.bytes(0, Math.toIntExact(t.info().byteSize()));
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    /** A tensor's elements from their bits: F32, BF16 (the top half of an F32), F16, F8_E4M3 codes (unscaled). */
    private static double[] raw(Tensor t) {
        byte[] b = bytes(t);
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        int n = Math.toIntExact(t.numel());
        double[] v = new double[n];
        for (int i = 0; i < n; i++) {
            v[i] = switch (t.dtype()) {
                case F32 -> bb.getFloat(4 * i);
                case BF16 -> Float.intBitsToFloat((bb.getShort(2 * i) & 0xFFFF) << 16);
                case F16 -> f16(bb.getShort(2 * i));
                case F8_E4M3 -> e4m3(b[i]);
                default -> throw new IllegalStateException(t.name() + ": " + t.dtype() + " is not a float tensor");
            };
        }
        return v;
    }

    /** IEEE half: sign, 5 exponent bits (bias 15), 10 mantissa bits. */
    static double f16(short bits) {
        int h = bits & 0xFFFF;
        int e = (h >>> 10) & 0x1F;
        int m = h & 0x3FF;
        double sign = (h & 0x8000) != 0 ? -1 : 1;
        if (e == 31) {
            return m == 0 ? sign * Double.POSITIVE_INFINITY : Double.NaN;
        }
        return e == 0 ? sign * m / 1024.0 * Math.pow(2, -14) : sign * (1 + m / 1024.0) * Math.pow(2, e - 15);
    }

    /** OCP E4M3 (float8_e4m3fn): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN. */
    static double e4m3(byte code) {
        int b = code & 0xFF;
        int e = (b >>> 3) & 0xF;
        int m = b & 7;
        double sign = (b & 0x80) != 0 ? -1 : 1;
        if (e == 15 && m == 7) {
            return Double.NaN;
        }
        return e == 0 ? sign * m / 8.0 * Math.pow(2, -6) : sign * (1 + m / 8.0) * Math.pow(2, e - 7);
    }
}
