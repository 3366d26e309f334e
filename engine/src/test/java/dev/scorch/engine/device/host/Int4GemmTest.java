package dev.scorch.engine.device.host;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Int4Groups;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DequantPlan;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.PackedInt4;
import dev.scorch.engine.diagnostics.Int4Equivalence;
import dev.scorch.engine.kernels.Linear;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * INT4 weights kept packed on a device ({@link PackedInt4}), on {@link HostDevice}, the CUDA kernels' twin: the
 * dequantisation gives the CPU reference's numbers, and a GEMM with the packed weight gives what the same weight
 * dequantised and uploaded gives, exactly in FP32 and BF16 and within fp32 rounding in BF16X3.
 */
class Int4GemmTest {
    @TempDir
    Path dir;

    /** An INT4 linear [out, in] written as a checkpoint's weight_packed and weight_scale, read back. */
    Linear linear(String name, int out, int in, int groupSize, int[] packed, float[] scales, DType scaleType)
            throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        ByteBuffer b = ByteBuffer.allocate(packed.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(packed);
        sw.add(name + ".weight_packed", DType.I32, new long[] {out, (in + 7) / 8}, b.array());
        long[] scaleShape = {out, (in + groupSize - 1) / groupSize};
        if (scaleType == DType.F16) {
            ByteBuffer h = ByteBuffer.allocate(scales.length * 2).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : scales) {
                h.putShort(f16(v));
            }
            sw.add(name + ".weight_scale", DType.F16, scaleShape, h.array());
        } else {
            sw.addFloats(name + ".weight_scale", scaleType, scaleShape, scales);
        }
        Path f = dir.resolve(name + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return Linear.int4(
                name + ".weight",
                sf.tensor(name + ".weight_packed"),
                sf.tensor(name + ".weight_scale"),
                out,
                in,
                groupSize);
    }

    /** A normal fp32 value that an IEEE half holds exactly, as that half. */
    static short f16(float v) {
        int bits = Float.floatToRawIntBits(v);
        int exp = ((bits >>> 23) & 0xFF) - 127 + 15;
        if (v == 0 || exp <= 0 || exp >= 31 || (bits & 0x1FFF) != 0) {
            throw new IllegalArgumentException(v + " is not a normal half");
        }
        short h = (short) (((bits >>> 16) & 0x8000) | (exp << 10) | ((bits >>> 13) & 0x3FF));
        assertEquals(v, NumberFormats.f16ToFloat(h));
        return h;
    }

    /** Row r holds nibble (r + j) % 16 at input j: every nibble at every bit position; scales vary by row and group. */
    Linear everyNibble(String name, int out, int in, int groupSize, DType scaleType) throws IOException {
        int words = (in + 7) / 8;
        int groups = (in + groupSize - 1) / groupSize;
        int[] packed = new int[out * words];
        float[] scales = new float[out * groups];
        for (int r = 0; r < out; r++) {
            for (int j = 0; j < in; j++) {
                packed[r * words + j / 8] |= ((r + j) % 16) << (4 * (j % 8));
            }
            for (int g = 0; g < groups; g++) {
                // BF16: 5 significant bits; F16: 9 (not BF16 values); F32: 24.
                float s = (g % 2 == 0 ? 1 : -1) * 0.0078125f * (1 + r + 3 * g);
                scales[r * groups + g] =
                        scaleType == DType.F32 ? s * 1.0001f : scaleType == DType.F16 ? s + 2 * Math.signum(s) : s;
            }
        }
        return linear(name, out, in, groupSize, packed, scales, scaleType);
    }

    static float[] dequantised(Buf b) {
        PackedInt4 p = (PackedInt4) b.storage();
        float[] w = new float[p.rows() * p.cols()];
        HostDevice.int4Dequant(p, 0, p.rows(), true, new float[][] {w});
        return w;
    }

    @Test
    void packedOnTheDeviceAndDequantisedAsTheCpuReference() throws IOException {
        for (DType scaleType : new DType[] {DType.BF16, DType.F16, DType.F32}) {
            Linear gate = everyNibble("gate" + scaleType, 16, 100, 32, scaleType); // partial last word and group
            Linear up = everyNibble("up" + scaleType, 5, 100, 32, scaleType);
            HostDevice dev = new HostDevice();
            for (GemmPrecision p : GemmPrecision.values()) {
                Buf b = dev.weight(p, gate, up);
                assertEquals(Buf.Kind.INT4, b.kind(), p.name());
                PackedInt4 w = (PackedInt4) b.storage();
                assertEquals(21, w.rows());
                assertEquals(100, w.cols());
                // 13 words and 4 scales a row: BF16 scales stay BF16; F16 and F32 ones (not BF16 values here) are held
                // in fp32.
                assertEquals(21 * 13 * 4 + 21 * 4 * (scaleType == DType.BF16 ? 2 : 4), b.bytes(), scaleType.name());
                assertEquals(scaleType != DType.F32, w.splitExact(), scaleType.name());
                float[] want = new float[21 * 100];
                System.arraycopy(gate.toFloat(), 0, want, 0, 1600);
                System.arraycopy(up.toFloat(), 0, want, 1600, 500);
                assertArrayEquals(want, dequantised(b), scaleType + " " + p);
            }
        }
    }

    @Test
    void mixedStacksTablesAndTheRouterGateAreDecodedDense() throws IOException {
        Linear a = everyNibble("a", 8, 64, 32, DType.BF16);
        Linear b = everyNibble("b", 8, 64, 16, DType.BF16); // another group size: not one packed weight
        HostDevice dev = new HostDevice();
        Buf mixed = dev.weight(GemmPrecision.FP32, a, b);
        assertEquals(Buf.Kind.F32, mixed.kind());
        float[] got = new float[16 * 64];
        dev.read(mixed, got, 0, got.length);
        float[] want = new float[16 * 64];
        System.arraycopy(a.toFloat(), 0, want, 0, 512);
        System.arraycopy(b.toFloat(), 0, want, 512, 512);
        assertArrayEquals(want, got);
        assertEquals(Buf.Kind.BF16, dev.denseWeight(GemmPrecision.BF16X3, a).kind());
    }

    /**
     * hi + lo = q · scale exactly for every q and every finite BF16 and F16 scale (at most 13 significant bits), with
     * hi and lo BF16 values; an F32 scale with more bits is not split (BF16X3 runs the fp32 GEMM then).
     */
    @Test
    void twoBf16PartsHoldEveryWeightOfABf16OrF16Scale() {
        long checked = 0;
        for (int bits = 0; bits < 1 << 16; bits++) {
            for (float s :
                    new float[] {NumberFormats.bf16ToFloat((short) bits), NumberFormats.f16ToFloat((short) bits)}) {
                if (!Float.isFinite(s)) {
                    continue;
                }
                assertTrue(PackedInt4.allSplitExact(new float[] {s}), "scale " + s);
                for (int q = -8; q <= 7; q++) {
                    float w = q * s;
                    float hi = HostDevice.bf16(w);
                    float lo = PackedInt4.lo(w, hi);
                    if (!Float.isFinite(hi)) {
                        continue; // q · s beyond BF16's range (|s| near FLT_MAX): no finite split, lo is 0
                    }
                    assertEquals(hi, HostDevice.bf16(hi));
                    assertEquals(lo, HostDevice.bf16(lo));
                    assertTrue(w == hi + lo, "q " + q + " scale " + s); // == : -0.0 splits into -0.0 + 0.0
                    checked++;
                }
            }
        }
        assertTrue(checked > 2_000_000, "checked " + checked);
        PackedInt4 f32 = (PackedInt4) new HostDevice()
                .int4Weight(new int[1], new float[] {0.1f}, 1, 8, 8)
                .storage();
        assertFalse(f32.splitExact());
        assertEquals(DequantPlan.FP32, f32.plan(GemmPrecision.BF16X3));
        assertEquals(new DequantPlan(false, 2, 2), f32.plan(GemmPrecision.BF16X2));
        PackedInt4 bf16 = (PackedInt4) new HostDevice()
                .int4Weight(new int[1], new float[] {0.125f}, 1, 8, 8)
                .storage();
        assertEquals(Buf.Kind.BF16, bf16.scales().kind());
        assertEquals(new DequantPlan(false, 2, 3), bf16.plan(GemmPrecision.BF16X3));
        assertEquals(new DequantPlan(false, 1, 1), bf16.plan(GemmPrecision.BF16));
        assertEquals(DequantPlan.FP32, bf16.plan(GemmPrecision.FP32));
    }

    /**
     * The packed GEMM against the weight dequantised on the host and uploaded: the same numbers in FP32 and BF16; in
     * BF16X3 within fp32 rounding of the exact product (measured on HostDevice: 1.1e-6 from fp64 where the dequantised
     * fp32 GEMM is 1.0e-6, |y| up to 2.2); BF16X2 to its 16 bits.
     */
    @Test
    void packedGemmGivesTheDequantisedWeightsNumbers() {
        Map<String, Double> d = Int4Equivalence.measure(new HostDevice());
        d.forEach((k, v) -> System.out.printf("INT4 HostDevice %-40s %.3g%n", k, v));
        assertEquals(0.0, d.get("FP32 packed vs dequantised fp32"));
        assertEquals(0.0, d.get("FP32 packed vs dequantised FP32"));
        assertEquals(0.0, d.get("BF16 packed vs dequantised BF16"));
        double fp32 = d.get("dequantised fp32 vs fp64");
        assertTrue(fp32 > 0 && fp32 < 1e-5, "fp32 GEMM vs fp64 " + fp32);
        assertTrue(d.get("BF16X3 packed vs fp64") <= 2 * fp32, d.toString());
        // Uploading the dequantised weight as BF16 rounds it: the packed BF16X3 GEMM keeps it whole, so it is far
        // closer.
        assertTrue(d.get("BF16X3 packed vs fp64") * 100 < d.get("BF16X3 packed vs dequantised BF16X3"), d.toString());
        assertTrue(d.get("BF16X2 packed vs fp64") < 1e-3, d.toString());
        assertTrue(d.get("BF16 packed vs fp64") > d.get("BF16X2 packed vs fp64"), d.toString());
    }

    /** F32 scales (not split): BF16X3 gives the fp32 GEMM's numbers. */
    @Test
    void f32ScalesRunTheFp32GemmInBf16x3() {
        SplittableRandom rnd = new SplittableRandom(4);
        int m = 5;
        int n = 7;
        int k = 70;
        float[] x = new float[m * k];
        float[] w = new float[n * k];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) rnd.nextGaussian();
        }
        Int4Groups q = Int4Groups.quantize(w, n, k, 16);
        float[] scales = q.scales().clone();
        for (int i = 0; i < scales.length; i++) {
            scales[i] *= 1.0001f;
        }
        HostDevice dev = new HostDevice();
        Buf packed = dev.int4Weight(q.packed(), scales, n, k, 16);
        float[] deq = dequantised(packed);
        assertArrayEquals(
                gemm(dev, x, m, k, dev.weight(deq, GemmPrecision.FP32), n, GemmPrecision.FP32),
                gemm(dev, x, m, k, packed, n, GemmPrecision.BF16X3));
    }

    /** Experts' grouped GEMM with packed weights: each group as the dequantised weight's GEMM over its rows. */
    @Test
    void groupedGemmOverPackedExperts() {
        SplittableRandom rnd = new SplittableRandom(9);
        int k = 96;
        int n = 40;
        int[] rowStart = {0, 3, 10};
        int[] rows = {3, 7, 2};
        float[] x = new float[12 * k];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        HostDevice dev = new HostDevice();
        Buf[] packed = new Buf[3];
        float[][] deq = new float[3][];
        for (int g = 0; g < 3; g++) {
            float[] w = new float[n * k];
            for (int i = 0; i < w.length; i++) {
                w[i] = (float) (rnd.nextGaussian() * 0.05);
            }
            Int4Groups q = Int4Groups.quantize(w, n, k, 32);
            packed[g] = dev.int4Weight(q.packed(), q.scales(), n, k, 32);
            deq[g] = q.dequantize();
        }
        for (GemmPrecision p : GemmPrecision.values()) {
            Buf y = dev.alloc(Buf.Kind.F32, 12L * n);
            dev.gemmGrouped(dev.upload(x), rowStart, rows, k, packed, n, y, p);
            float[] got = new float[12 * n];
            dev.read(y, got, 0, got.length);
            for (int g = 0; g < 3; g++) {
                float[] xg = java.util.Arrays.copyOfRange(x, rowStart[g] * k, (rowStart[g] + rows[g]) * k);
                float[] want = gemm(dev, xg, rows[g], k, packed[g], n, p);
                assertArrayEquals(
                        want,
                        java.util.Arrays.copyOfRange(got, rowStart[g] * n, (rowStart[g] + rows[g]) * n),
                        p + " group " + g);
                if (p == GemmPrecision.FP32) {
                    assertArrayEquals(gemm(dev, xg, rows[g], k, dev.weight(deq[g], p), n, p), want, "group " + g);
                }
            }
        }
    }

    /** Tiles of weight rows (a weight of more than TILE_ELEMS): each output column as the untiled GEMM's. */
    @Test
    void aWeightBeyondOneTileIsMultipliedTileByTile() {
        int k = 8;
        int n = (int) (DequantPlan.TILE_ELEMS / k) + 3; // two tiles: all but 3 rows, then 3
        assertEquals(2, (n + DequantPlan.tileRows(n, k) - 1) / DequantPlan.tileRows(n, k));
        int[] packed = new int[n];
        float[] scales = new float[n];
        for (int r = 0; r < n; r++) {
            packed[r] = 0x89ABCDEF ^ (r * 0x9E3779B9);
            scales[r] = new float[] {1, 0.5f, 0.75f, 3, 0.125f}[r % 5];
        }
        float[] x = {0.5f, -1, 2, 0.25f, 3, -0.125f, 1, 7};
        HostDevice dev = new HostDevice();
        Buf w = dev.int4Weight(packed, scales, n, k, 8);
        for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.FP32, GemmPrecision.BF16X3}) {
            float[] y = gemm(dev, x, 1, k, w, n, p);
            for (int r : new int[] {0, 1, n - 4, n - 3, n - 1}) {
                double want = 0;
                for (int c = 0; c < k; c++) {
                    want += x[c] * (double) ((((packed[r] >>> (4 * c)) & 0xF) - 8) * scales[r]);
                }
                assertEquals(want, y[r], 1e-5, p + " row " + r);
            }
        }
    }

    @Test
    void deviceBytesAreThePackedWordsScalesAndOneTileOfScratch() {
        HostDevice dev = new HostDevice();
        long before = dev.totalBytes() - dev.freeBytes();
        int n = 64;
        int k = 256;
        Int4Groups q = Int4Groups.quantize(new float[n * k], n, k, 32);
        Buf w = dev.int4Weight(q.packed(), q.scales(), n, k, 32);
        long weight = (long) n * k / 2 + (long) n * (k / 32) * 2; // 4 bits a weight, a BF16 scale per 32
        assertEquals(weight, w.bytes());
        assertEquals(weight, dev.totalBytes() - dev.freeBytes() - before);
        Buf x = dev.upload(new float[3 * k]);
        Buf y = dev.alloc(Buf.Kind.F32, 3L * n);
        long io = x.bytes() + y.bytes();
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.BF16);
        assertEquals(weight + io + 2L * n * k, dev.totalBytes() - dev.freeBytes() - before, "BF16: hi only");
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.BF16X3);
        assertEquals(
                weight + io + 4L * n * k, dev.totalBytes() - dev.freeBytes() - before, "hi and lo: the scratch grows");
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.BF16);
        assertEquals(weight + io + 4L * n * k, dev.totalBytes() - dev.freeBytes() - before, "and never shrinks");
        dev.free(w);
        assertEquals(io + 4L * n * k, dev.totalBytes() - dev.freeBytes() - before);
    }

    @Test
    void misuseIsRefusedWithTheShapes() {
        HostDevice dev = new HostDevice();
        Buf w = dev.int4Weight(new int[4 * 2], new float[4], 4, 16, 16);
        Buf x = dev.upload(new float[2 * 16]);
        Buf y = dev.alloc(Buf.Kind.F32, 2 * 8);
        String msg = assertThrows(IllegalArgumentException.class, () -> dev.gemm(x, 1, 16, w, 8, y, GemmPrecision.FP32))
                .getMessage();
        assertEquals("gemm w: an INT4 weight [4, 16] used as [8, 16]", msg);
        msg = assertThrows(IllegalArgumentException.class, () -> dev.int4Weight(new int[4], new float[4], 4, 16, 16))
                .getMessage();
        assertEquals("INT4 weight [4, 16] in groups of 16: 4 packed words and 4 scales", msg);
        assertThrows(IllegalArgumentException.class, () -> dev.alloc(Buf.Kind.INT4, 8));
        assertThrows(IllegalArgumentException.class, () -> w.slice(0, 1));
        assertThrows(IllegalArgumentException.class, () -> dev.read(w, new float[1], 0, 1));
    }

    static float[] gemm(Device dev, float[] x, int m, int k, Buf w, int n, GemmPrecision p) {
        Buf y = dev.alloc(Buf.Kind.F32, (long) m * n);
        dev.gemm(dev.upload(x), m, k, w, n, y, p);
        float[] out = new float[m * n];
        dev.read(y, out, 0, out.length);
        return out;
    }
}
