package dev.scorch.engine.backend;

import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;

/**
 * The bytes of a checkpoint's tensors in the precision the checkpoint stores them, from config.json alone: what a
 * GPU holds when the weights stay resident as stored (FP8 blocks and INT4 groups are dequantised tile by tile inside
 * the GEMMs). Per tensor, by {@link WeightLayout}:
 * <ul>
 *   <li>FP8 linears (quant_method fp8: every LINEAR; compressed-tensors float-quantized: the modules its groups
 *       quantize): 1 byte a weight plus one fp32 scale per [block rows x block cols] block (128 x 128 published).</li>
 *   <li>INT4 linears (compressed-tensors pack-quantized: Kimi-K2-Thinking's routed experts): 4 bits a weight in int32
 *       words, ceil(in / 8) a row, one BF16 scale per group, and the I64[2] weight_shape.</li>
 *   <li>The router's e_score_correction_bias: fp32 (as DeepSeek-V3 and Kimi K2 store it).</li>
 *   <li>Everything else (embedding, norms, router gate, lm_head, unquantized linears): torch_dtype's bytes (BF16).</li>
 * </ul>
 *
 * @param embedding  model.embed_tokens
 * @param layers     layer i's tensors, i in [0, num_hidden_layers)
 * @param head       model.norm and lm_head
 */
public record CheckpointBytes(long embedding, long[] layers, long head) {

    /** Bytes of one FP8 block scale and one INT4 group scale. */
    static final long FP8_SCALE_BYTES = Float.BYTES;

    static final long INT4_SCALE_BYTES = 2;
    /** compressed-tensors' weight_shape: I64[2]. */
    static final long INT4_SHAPE_BYTES = 2 * Long.BYTES;

    public static CheckpointBytes of(ModelConfig c) {
        long embedding = 0;
        long head = 0;
        long[] layers = new long[c.numHiddenLayers()];
        for (WeightLayout.Spec s : WeightLayout.of(c)) {
            long b = bytes(c, s);
            if (s.layer() >= 0) {
                layers[s.layer()] += b;
            } else if (s.kind() == WeightLayout.Kind.EMBEDDING) {
                embedding += b;
            } else {
                head += b;
            }
        }
        return new CheckpointBytes(embedding, layers, head);
    }

    /** One tensor's bytes as c's checkpoint stores it (see the class comment). */
    static long bytes(ModelConfig c, WeightLayout.Spec s) {
        QuantizationConfig q = c.quantization();
        boolean quantized = q != null
                && s.linearClass()
                && (q.compressedTensors()
                        ? q.quantizes(c.checkpointName(s.module()), true)
                        : s.kind() == WeightLayout.Kind.LINEAR); // DeepSeek's fp8: every linear but lm_head
        if (quantized && c.isFp8()) {
            long out = s.shape()[0];
            long in = s.shape()[1];
            long blocks = ceil(out, q.blockRows()) * ceil(in, q.blockCols());
            return out * in + blocks * FP8_SCALE_BYTES;
        }
        if (quantized && c.isInt4()) {
            long out = s.shape()[0];
            long in = s.shape()[1];
            return out * ceil(in, 8) * Integer.BYTES
                    + out * ceil(in, q.groupSize()) * INT4_SCALE_BYTES
                    + INT4_SHAPE_BYTES;
        }
        if (s.kind() == WeightLayout.Kind.ROUTER_BIAS) {
            return s.numel() * Float.BYTES;
        }
        return s.numel() * dtypeBytes(c.torchDtype());
    }

    static long dtypeBytes(String torchDtype) {
        return switch (torchDtype) {
            case "float32" -> 4;
            default -> 2; // bfloat16, float16
        };
    }

    private static long ceil(long a, long b) {
        return (a + b - 1) / b;
    }

    /** Every tensor's bytes. */
    public long total() {
        long t = embedding + head;
        for (long l : layers) {
            t += l;
        }
        return t;
    }

    /** Layers [from, to)'s bytes. */
    public long layers(int from, int to) {
        long t = 0;
        for (int i = from; i < to; i++) {
            t += layers[i];
        }
        return t;
    }
}
