package dev.scorch.engine.kernels;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Int4Groups;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;

/** INT4 weights for kernel tests: written to a checkpoint file and opened as the engine opens them, and decoded by a plain loop. */
final class Int4Weights {
    private Int4Weights() {}

    /** An INT4 Linear [out, in] of the given packed words [out, ceil(in / 8)] and scales [out, ceil(in / group)] in scaleType. */
    static Linear write(Path file, int out, int in, int group, int[] packed, float[] scales, DType scaleType)
            throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        ByteBuffer b = ByteBuffer.allocate(packed.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(packed);
        sw.add("w.weight_packed", DType.I32, new long[] {out, (in + 7) / 8}, b.array());
        sw.addFloats("w.weight_scale", scaleType, new long[] {out, (in + group - 1) / group}, scales);
        sw.write(file);
        SafetensorsFile sf = SafetensorsFile.open(file);
        return Linear.int4("w.weight", sf.tensor("w.weight_packed"), sf.tensor("w.weight_scale"), out, in, group);
    }

    /** Gaussian weights quantised in groups (BF16 scales), as a checkpoint holds a Kimi-K2-Thinking expert. */
    static Linear random(Path dir, int out, int in, int group, long seed) throws IOException {
        Int4Groups q = Int4Groups.quantize(GemmTest.randn(out * in, seed), out, in, group);
        return write(
                dir.resolve("int4-" + out + "x" + in + "-" + group + "-" + seed + ".safetensors"),
                out,
                in,
                group,
                q.packed(),
                q.scales(),
                DType.BF16);
    }

    /**
     * An INT4 Linear whose scales are given as raw bit patterns of scaleType (BF16 and F16: the low 16 bits; F32: all 32), so
     * that every pattern, NaN payloads and subnormals included, reaches the file as it is.
     */
    static Linear writeBits(Path file, int out, int in, int group, int[] packed, int[] scaleBits, DType scaleType)
            throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        ByteBuffer b = ByteBuffer.allocate(packed.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(packed);
        sw.add("w.weight_packed", DType.I32, new long[] {out, (in + 7) / 8}, b.array());
        ByteBuffer s = ByteBuffer.allocate(scaleBits.length * scaleType.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int bits : scaleBits) {
            if (scaleType == DType.F32) {
                s.putInt(bits);
            } else {
                s.putShort((short) bits);
            }
        }
        sw.add("w.weight_scale", scaleType, new long[] {out, (in + group - 1) / group}, s.array());
        sw.write(file);
        SafetensorsFile sf = SafetensorsFile.open(file);
        return Linear.int4("w.weight", sf.tensor("w.weight_packed"), sf.tensor("w.weight_scale"), out, in, group);
    }

    /** Packed words [out, ceil(in / 8)] where row r holds nibble (r + j) % 16 at input j: every nibble at every place of a word. */
    static int[] everyNibble(int out, int in) {
        int words = (in + 7) / 8;
        int[] packed = new int[out * words];
        for (int r = 0; r < out; r++) {
            for (int j = 0; j < in; j++) {
                packed[r * words + j / 8] |= ((r + j) % 16) << (4 * (j % 8));
            }
        }
        return packed;
    }

    /** The value of a raw scale pattern of scaleType. */
    static float scale(int bits, DType scaleType) {
        return switch (scaleType) {
            case BF16 -> Float.intBitsToFloat(bits << 16);
            case F16 -> NumberFormats.f16ToFloat((short) bits);
            case F32 -> Float.intBitsToFloat(bits);
            default -> throw new IllegalArgumentException(scaleType.toString());
        };
    }

    /** W[row, j] by the format's definition: (nibble j % 8 of word j / 8) - 8, times the scale of group j / group. */
    static float dequantize(int[] packed, float[] scales, int in, int group, int row, int j) {
        int word = packed[row * ((in + 7) / 8) + j / 8];
        int nibble = (word >>> (4 * (j % 8))) & 0xF;
        return (nibble - 8) * scales[row * ((in + group - 1) / group) + j / group];
    }
}
