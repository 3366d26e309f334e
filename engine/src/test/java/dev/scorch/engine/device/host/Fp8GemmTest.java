package dev.scorch.engine.device.host;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.DType;
import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.checkpoint.SafetensorsFile;
import dev.scorch.engine.checkpoint.SafetensorsWriter;
import dev.scorch.engine.demo.Fp8Blocks;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DequantPlan;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.PackedFp8;
import dev.scorch.engine.diagnostics.Fp8Equivalence;
import dev.scorch.engine.kernels.Linear;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * FP8 block weights kept as their codes on a device ({@link PackedFp8}), on {@link HostDevice}, the CUDA kernels' twin:
 * the dequantisation gives the CPU reference's numbers, and a GEMM with the packed weight gives what the same weight
 * dequantised and uploaded gives, exactly in FP32 and BF16, and within fp32 rounding of the exact product in BF16X3
 * (where the dequantised upload rounds every weight to BF16).
 */
class Fp8GemmTest {
    @TempDir
    Path dir;

    /** An FP8 linear [out, in] of codes and 128 x 128 block scales written as a checkpoint's tensors, read back. */
    Linear linear(String name, int out, int in, byte[] codes, float[] scales, DType scaleType) throws IOException {
        SafetensorsWriter sw = new SafetensorsWriter();
        sw.add(name + ".weight", DType.F8_E4M3, new long[] {out, in}, codes);
        sw.addFloats(name + ".weight_scale_inv", scaleType, new long[] {(out + 127) / 128, (in + 127) / 128}, scales);
        Path f = dir.resolve(name + ".safetensors");
        sw.write(f);
        SafetensorsFile sf = SafetensorsFile.open(f);
        return new Linear(sf.tensor(name + ".weight"), sf.tensor(name + ".weight_scale_inv"), 128, 128);
    }

    /** Row r holds code (7r + c) % 256 at input c (NaN codes 0x7F, 0xFF as 0): every code; scales vary by block. */
    Linear everyCode(String name, int out, int in, DType scaleType) throws IOException {
        byte[] codes = new byte[out * in];
        for (int r = 0; r < out; r++) {
            for (int c = 0; c < in; c++) {
                int code = (7 * r + c) & 0xFF;
                codes[r * in + c] = (byte) ((code & 0x7F) == 0x7F ? 0 : code);
            }
        }
        int sr = (out + 127) / 128;
        int sc = (in + 127) / 128;
        float[] scales = new float[sr * sc];
        for (int i = 0; i < scales.length; i++) {
            float s = 0.01f * (1 + i) / 448f; // fp32: 24 significant bits
            scales[i] = scaleType == DType.BF16 ? HostDevice.bf16(s) : s;
        }
        return linear(name, out, in, codes, scales, scaleType);
    }

    static float[] dequantised(Buf b) {
        PackedFp8 p = (PackedFp8) b.storage();
        float[] w = new float[p.rows() * p.cols()];
        HostDevice.fp8Dequant(p, 0, p.rows(), true, new float[][] {w});
        return w;
    }

    /**
     * gate [200, 300] and up [72, 300] stacked (partial row and column blocks, and up's block rows starting at row 200,
     * inside a 128-row block of the stack): codes, one scale row per block row of each, the CPU reference's values.
     */
    @Test
    void packedOnTheDeviceAndDequantisedAsTheCpuReference() throws IOException {
        for (DType scaleType : new DType[] {DType.F32, DType.BF16}) {
            Linear gate = everyCode("gate" + scaleType, 200, 300, scaleType);
            Linear up = everyCode("up" + scaleType, 72, 300, scaleType);
            HostDevice dev = new HostDevice();
            for (GemmPrecision p : GemmPrecision.values()) {
                long before = dev.totalBytes() - dev.freeBytes();
                Buf b = dev.weight(p, gate, up);
                assertEquals(Buf.Kind.FP8, b.kind(), p.name());
                PackedFp8 w = (PackedFp8) b.storage();
                assertEquals(272, w.rows());
                assertEquals(300, w.cols());
                assertEquals(3, w.scaleCols());
                // 272 x 300 codes, 4 a word; 3 scale rows (gate 2, up 1) of 3 fp32 scales; a scale row index a row.
                assertEquals(272 * 300 + 3 * 3 * 4 + 272 * 4, b.bytes(), scaleType.name());
                assertEquals(b.bytes(), dev.totalBytes() - dev.freeBytes() - before);
                assertEquals(scaleType == DType.F32 ? 3 : 2, w.weightParts(), scaleType.name());
                float[] want = new float[272 * 300];
                System.arraycopy(gate.toFloat(), 0, want, 0, 200 * 300);
                System.arraycopy(up.toFloat(), 0, want, 200 * 300, 72 * 300);
                assertArrayEquals(want, dequantised(b), scaleType + " " + p);
            }
        }
    }

    @Test
    void mixedStacksAreDecodedDense() throws IOException {
        Linear a = everyCode("a", 8, 64, DType.F32);
        SafetensorsWriter sw = new SafetensorsWriter();
        float[] plain = new float[8 * 64];
        for (int i = 0; i < plain.length; i++) {
            plain[i] = i * 0.001f;
        }
        sw.addFloats("b.weight", DType.BF16, new long[] {8, 64}, plain);
        sw.write(dir.resolve("b.safetensors"));
        Linear b = new Linear(SafetensorsFile.open(dir.resolve("b.safetensors")).tensor("b.weight"));
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
     * The BF16 parts hold code · scale exactly: one part for every code and every scale of at most 4 significant bits,
     * two for every finite BF16 scale, three for fp32 scales (a million random ones), every E4M3 code each time.
     */
    @Test
    void bf16PartsHoldEveryWeightExactly() {
        long checked = 0;
        SplittableRandom rnd = new SplittableRandom(8);
        for (int i = 0; i < (1 << 16) + 4096; i++) {
            float s = i < 1 << 16
                    ? NumberFormats.bf16ToFloat((short) i)
                    : Float.intBitsToFloat(rnd.nextInt(1, 0x7F000000) & 0x7FFFFFFF);
            if (!Float.isFinite(s) || Math.abs(s) > 1e30f || Math.abs(s) < 1e-30f) {
                continue; // beyond any block scale: products leave fp32's normal range
            }
            int parts = PackedFp8.weightParts(new float[] {s});
            int bits = 24 - Integer.numberOfTrailingZeros(Float.floatToRawIntBits(s) | 0x800000);
            assertEquals(bits <= 4 ? 1 : bits <= 12 ? 2 : 3, parts, "scale " + s);
            assertTrue(i >= 1 << 16 || parts <= 2, "a BF16 scale needs at most two parts: " + s);
            for (int code = 0; code < 256; code++) {
                float w = NumberFormats.e4m3ToFloat((byte) code) * s;
                if (!Float.isFinite(w)) {
                    continue; // the NaN codes
                }
                float sum = 0;
                for (int a = 0; a < parts; a++) {
                    float p = PackedFp8.part(w, a);
                    assertEquals(p, HostDevice.bf16(p));
                    sum += p;
                }
                assertTrue(w == sum, "code " + code + " scale " + s); // == : -0.0 splits into -0.0 + 0.0
                checked++;
            }
        }
        assertTrue(checked > 10_000_000, "checked " + checked);
        assertEquals(1, PackedFp8.weightParts(new float[] {0.375f, 1f, -48f}));
        assertEquals(2, PackedFp8.weightParts(new float[] {0.375f, HostDevice.bf16(0.1f)}));
        assertEquals(3, PackedFp8.weightParts(new float[] {HostDevice.bf16(0.1f), 0.1f}));
        Buf w = PackedFp8.upload(new HostDevice(), new byte[4], new float[] {0.1f}, 1, 4, 128, 128);
        PackedFp8 p = (PackedFp8) w.storage();
        assertEquals(DequantPlan.FP32, p.plan(GemmPrecision.FP32));
        assertEquals(new DequantPlan(false, 3, 3), p.plan(GemmPrecision.BF16X3));
        assertEquals(new DequantPlan(false, 2, 2), p.plan(GemmPrecision.BF16X2));
        assertEquals(new DequantPlan(false, 1, 1), p.plan(GemmPrecision.BF16));
        assertEquals(6, p.plan(GemmPrecision.BF16X3).gemms());
    }

    /**
     * The packed GEMM against the weight dequantised on the host and uploaded (a weight [200, 1004], 24 rows of x): the
     * same numbers in FP32 and BF16; in BF16X3 within fp32 rounding of the exact product, where the dequantised upload
     * rounds W to BF16. Measured on HostDevice (|y| up to 1.36), max |y - fp64| with fp32 scales / BF16 scales: fp32
     * GEMM 1.34e-6 / 1.30e-6; BF16X3 packed 5.75e-7 / 5.36e-7, the BF16-rounded upload in BF16X3 2.68e-3 / 2.30e-3;
     * BF16X2 packed 6.67e-6 / 4.99e-6; BF16 3.13e-3 / 3.19e-3.
     */
    @Test
    void packedGemmGivesTheDequantisedWeightsNumbers() {
        Map<String, Double> d = Fp8Equivalence.measure(new HostDevice());
        d.forEach((k, v) -> System.out.printf("FP8 HostDevice %-50s %.3g%n", k, v));
        for (String s : new String[] {"fp32 scales", "bf16 scales"}) {
            assertEquals(0.0, d.get(s + " FP32 packed vs dequantised fp32"), s);
            assertEquals(0.0, d.get(s + " FP32 packed vs dequantised FP32"), s);
            assertEquals(0.0, d.get(s + " BF16 packed vs dequantised BF16"), s);
            double fp32 = d.get(s + " dequantised fp32 vs fp64");
            assertTrue(fp32 > 0 && fp32 < 1e-5, s + ": fp32 GEMM vs fp64 " + fp32);
            assertTrue(d.get(s + " BF16X3 packed vs fp64") <= 2 * fp32, d.toString());
            assertTrue(
                    d.get(s + " BF16X3 packed vs fp64") * 100 < d.get(s + " BF16X3 packed vs dequantised BF16X3"),
                    d.toString());
            assertTrue(d.get(s + " BF16X2 packed vs fp64") < 1e-4, d.toString());
            assertTrue(d.get(s + " BF16 packed vs fp64") > d.get(s + " BF16X2 packed vs fp64"), d.toString());
        }
    }

    /** Experts' grouped GEMM with packed weights: each group as the dequantised weight's GEMM over its rows. */
    @Test
    void groupedGemmOverPackedExperts() {
        SplittableRandom rnd = new SplittableRandom(9);
        int k = 160;
        int n = 40;
        int[] rowStart = {0, 3, 10};
        int[] rows = {3, 7, 2};
        float[] x = new float[12 * k];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (rnd.nextDouble() * 2 - 1);
        }
        HostDevice dev = new HostDevice();
        Buf[] packed = new Buf[3];
        for (int g = 0; g < 3; g++) {
            float[] w = new float[n * k];
            for (int i = 0; i < w.length; i++) {
                w[i] = (float) (rnd.nextGaussian() * 0.05);
            }
            Fp8Blocks q = Fp8Blocks.quantize(w, n, k, 128, 128);
            packed[g] = PackedFp8.upload(dev, q.codes(), q.scaleInv(), n, k, 128, 128);
        }
        for (GemmPrecision p : GemmPrecision.values()) {
            Buf y = dev.alloc(Buf.Kind.F32, 12L * n);
            dev.gemmGrouped(dev.upload(x), rowStart, rows, k, packed, n, y, p);
            float[] got = new float[12 * n];
            dev.read(y, got, 0, got.length);
            for (int g = 0; g < 3; g++) {
                float[] xg = java.util.Arrays.copyOfRange(x, rowStart[g] * k, (rowStart[g] + rows[g]) * k);
                float[] want = Int4GemmTest.gemm(dev, xg, rows[g], k, packed[g], n, p);
                assertArrayEquals(
                        want,
                        java.util.Arrays.copyOfRange(got, rowStart[g] * n, (rowStart[g] + rows[g]) * n),
                        p + " group " + g);
                if (p == GemmPrecision.FP32) {
                    Buf deq = dev.weight(dequantised(packed[g]), p);
                    assertArrayEquals(Int4GemmTest.gemm(dev, xg, rows[g], k, deq, n, p), want, "group " + g);
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
        byte[] codes = new byte[n * k];
        for (int i = 0; i < codes.length; i++) {
            int c = (i * 0x9E3779B9) >>> 24;
            codes[i] = (byte) ((c & 0x7F) == 0x7F ? 0x38 : c);
        }
        int blocks = (n + 127) / 128;
        float[] scales = new float[blocks];
        for (int b = 0; b < blocks; b++) {
            scales[b] = new float[] {1, 0.5f, 0.75f, 3, 0.125f}[b % 5]; // one part a weight: hi only in BF16X3
        }
        float[] x = {0.5f, -1, 2, 0.25f, 3, -0.125f, 1, 7};
        HostDevice dev = new HostDevice();
        Buf w = PackedFp8.upload(dev, codes, scales, n, k, 128, 128);
        for (GemmPrecision p : new GemmPrecision[] {GemmPrecision.FP32, GemmPrecision.BF16X3}) {
            float[] y = Int4GemmTest.gemm(dev, x, 1, k, w, n, p);
            for (int r : new int[] {0, 1, n - 4, n - 3, n - 1}) {
                double want = 0;
                for (int c = 0; c < k; c++) {
                    want += x[c] * (double) (NumberFormats.e4m3ToFloat(codes[r * k + c]) * scales[r / 128]);
                }
                assertEquals(want, y[r], 1e-5 * Math.max(1, Math.abs(want)), p + " row " + r);
            }
        }
    }

    @Test
    void deviceBytesAreTheCodesScalesAndOneTileOfScratch() {
        HostDevice dev = new HostDevice();
        long before = dev.totalBytes() - dev.freeBytes();
        int n = 130;
        int k = 256;
        Fp8Blocks q = Fp8Blocks.quantize(new float[n * k], n, k, 128, 128);
        Buf w = PackedFp8.upload(dev, q.codes(), new float[] {0.1f, 0.2f, 0.3f, 0.4f}, n, k, 128, 128);
        long weight = (long) n * k + 2 * 2 * 4 + n * 4; // a byte a weight, 2 x 2 fp32 scales, a scale row index a row
        assertEquals(weight, w.bytes());
        assertEquals(weight, dev.totalBytes() - dev.freeBytes() - before);
        Buf x = dev.upload(new float[3 * k]);
        Buf y = dev.alloc(Buf.Kind.F32, 3L * n);
        long io = x.bytes() + y.bytes();
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.BF16);
        assertEquals(weight + io + 2L * n * k, dev.totalBytes() - dev.freeBytes() - before, "BF16: one part");
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.BF16X3);
        assertEquals(
                weight + io + 6L * n * k,
                dev.totalBytes() - dev.freeBytes() - before,
                "three parts (fp32 scales): the scratch grows");
        dev.gemm(x, 3, k, w, n, y, GemmPrecision.FP32);
        assertEquals(weight + io + 6L * n * k, dev.totalBytes() - dev.freeBytes() - before, "and never shrinks");
        dev.free(w);
        assertEquals(io + 6L * n * k, dev.totalBytes() - dev.freeBytes() - before);
    }

    @Test
    void misuseIsRefusedWithTheShapes() {
        HostDevice dev = new HostDevice();
        Buf w = PackedFp8.upload(dev, new byte[4 * 16], new float[] {1f}, 4, 16, 128, 128);
        Buf x = dev.upload(new float[2 * 16]);
        Buf y = dev.alloc(Buf.Kind.F32, 2 * 8);
        String msg = assertThrows(IllegalArgumentException.class, () -> dev.gemm(x, 1, 16, w, 8, y, GemmPrecision.FP32))
                .getMessage();
        assertEquals("gemm w: an FP8 weight [4, 16] used as [8, 16]", msg);
        msg = assertThrows(
                        IllegalArgumentException.class,
                        () -> dev.fp8Weight(new int[15], new float[1], new int[4], 4, 16, 128))
                .getMessage();
        assertEquals("FP8 weight [4, 16] in blocks of 128 columns: 15 code words, 1 scales and 4 scale rows", msg);
        msg = assertThrows(
                        IllegalArgumentException.class,
                        () -> dev.fp8Weight(new int[16], new float[1], new int[] {0, 0, 1, 0}, 4, 16, 128))
                .getMessage();
        assertEquals("FP8 weight [4, 16]: row 2 has scale row 1 of 1", msg);
        assertThrows(IllegalArgumentException.class, () -> dev.alloc(Buf.Kind.FP8, 8));
        assertThrows(IllegalArgumentException.class, () -> w.slice(0, 1));
        assertThrows(IllegalArgumentException.class, () -> dev.read(w, new float[1], 0, 1));
    }
}
