package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** FP8 E4M3FN, BF16 and F16 conversions against brute force and known bit patterns. */
class NumberFormatsTest {

    /** Reference encoder: the nearest of all 254 finite E4M3 codes; ties go to the even code, then to the code with f's sign. */
    static byte bruteForceE4m3(float f) {
        int best = -1;
        double bestDist = Double.POSITIVE_INFINITY;
        boolean negative = (Float.floatToRawIntBits(f) & 0x80000000) != 0;
        for (int code = 0; code < 256; code++) {
            float v = NumberFormats.e4m3ToFloat((byte) code);
            if (Float.isNaN(v)) {
                continue;
            }
            double d = Math.abs((double) f - (double) v);
            if (d < bestDist || (d == bestDist && better(code, best, negative))) {
                best = code;
                bestDist = d;
            }
        }
        return (byte) best;
    }

    private static boolean better(int code, int best, boolean negative) {
        boolean codeEven = (code & 1) == 0;
        boolean bestEven = (best & 1) == 0;
        if (codeEven != bestEven) {
            return codeEven;
        }
        return ((code & 0x80) != 0) == negative; // +0 vs -0: keep f's sign
    }

    private static void assertE4m3(float f) {
        byte want = bruteForceE4m3(f);
        byte got = NumberFormats.floatToE4m3(f);
        assertEquals(
                want,
                got,
                () -> String.format(
                        "floatToE4m3(%s = 0x%08x): want 0x%02x (%s), got 0x%02x (%s)",
                        f,
                        Float.floatToRawIntBits(f),
                        want & 0xFF,
                        NumberFormats.e4m3ToFloat(want),
                        got & 0xFF,
                        NumberFormats.e4m3ToFloat(got)));
    }

    @Test
    void e4m3KnownValues() {
        assertEquals(448f, NumberFormats.e4m3ToFloat((byte) 0x7E));
        assertEquals(-448f, NumberFormats.e4m3ToFloat((byte) 0xFE));
        assertEquals(0x1p-6f, NumberFormats.e4m3ToFloat((byte) 0x08)); // smallest normal
        assertEquals(0x1p-9f, NumberFormats.e4m3ToFloat((byte) 0x01)); // smallest subnormal
        assertEquals(7 * 0x1p-9f, NumberFormats.e4m3ToFloat((byte) 0x07)); // largest subnormal
        assertEquals(1f, NumberFormats.e4m3ToFloat((byte) 0x38));
        assertEquals(1.125f, NumberFormats.e4m3ToFloat((byte) 0x39));
        assertEquals(-1.5f, NumberFormats.e4m3ToFloat((byte) 0xBC));
        assertEquals(240f, NumberFormats.e4m3ToFloat((byte) 0x77));
        assertEquals(0f, NumberFormats.e4m3ToFloat((byte) 0x00));
        assertEquals(Float.floatToRawIntBits(-0f), Float.floatToRawIntBits(NumberFormats.e4m3ToFloat((byte) 0x80)));
        assertTrue(Float.isNaN(NumberFormats.e4m3ToFloat((byte) 0x7F)));
        assertTrue(Float.isNaN(NumberFormats.e4m3ToFloat((byte) 0xFF)));
        // No infinities and exactly two NaNs: 0x78..0x7E are finite.
        int nans = 0;
        for (int b = 0; b < 256; b++) {
            float v = NumberFormats.e4m3ToFloat((byte) b);
            assertTrue(!Float.isInfinite(v));
            if (Float.isNaN(v)) {
                nans++;
            }
        }
        assertEquals(2, nans);
    }

    @Test
    void e4m3EncodesEveryExactCodeToItself() {
        for (int b = 0; b < 256; b++) {
            float v = NumberFormats.e4m3ToFloat((byte) b);
            if (!Float.isNaN(v)) {
                assertEquals((byte) b, NumberFormats.floatToE4m3(v), "code 0x" + Integer.toHexString(b));
            }
        }
    }

    @Test
    void e4m3MatchesBruteForceAtHalfwayPointsAndNeighbours() {
        // Sorted non-negative finite values: midpoints are the ties, their float neighbours must round the near way.
        List<Float> values = new ArrayList<>();
        for (int b = 0; b <= 0x7E; b++) {
            values.add(NumberFormats.e4m3ToFloat((byte) b));
        }
        for (int i = 0; i + 1 < values.size(); i++) {
            float mid = (values.get(i) + values.get(i + 1)) / 2; // exact in float
            for (float f : new float[] {mid, Math.nextUp(mid), Math.nextDown(mid)}) {
                assertE4m3(f);
                assertE4m3(-f);
            }
        }
        // Ties really do go to the even code: 1.0625 lies between 1.0 (0x38) and 1.125 (0x39).
        assertEquals((byte) 0x38, NumberFormats.floatToE4m3(1.0625f));
        // 1.1875 lies between 1.125 (0x39) and 1.25 (0x3A).
        assertEquals((byte) 0x3A, NumberFormats.floatToE4m3(1.1875f));
        // Subnormal tie: 1.5 * 2^-9 between 0x01 and 0x02; 0.5 * 2^-9 between 0 and 0x01.
        assertEquals((byte) 0x02, NumberFormats.floatToE4m3(1.5f * 0x1p-9f));
        assertEquals((byte) 0x00, NumberFormats.floatToE4m3(0.5f * 0x1p-9f));
        // Largest subnormal rounding up into the first normal: 7.5 * 2^-9 -> 0x08.
        assertEquals((byte) 0x08, NumberFormats.floatToE4m3(7.5f * 0x1p-9f));
    }

    @Test
    void e4m3MatchesBruteForceOnManyValues() {
        SplittableRandom rnd = new SplittableRandom(42);
        for (int i = 0; i < 20_000; i++) {
            // Log-uniform over 2^-14 .. 2^10: underflow, subnormals, normals and saturation.
            float f = (float) Math.scalb(1 + rnd.nextDouble(), rnd.nextInt(-14, 10));
            assertE4m3(rnd.nextBoolean() ? f : -f);
        }
        for (int i = 0; i < 5_000; i++) {
            assertE4m3((float) rnd.nextDouble(-500, 500));
        }
        for (float f : new float[] {
            0f,
            -0f,
            Float.MIN_VALUE,
            -Float.MIN_VALUE,
            1e-30f,
            0x1p-10f,
            0x1p-6f,
            0.1f,
            1f / 3,
            447f,
            448f,
            449f,
            464f,
            480f,
            500f,
            1e6f,
            Float.MAX_VALUE,
            -449f,
            -1e6f,
            -Float.MAX_VALUE
        }) {
            assertE4m3(f);
        }
    }

    @Test
    void e4m3SaturatesAbove448() {
        for (float f : new float[] {448.5f, 464f, 465f, 1000f, 1e30f, Float.MAX_VALUE, Float.POSITIVE_INFINITY}) {
            assertEquals((byte) 0x7E, NumberFormats.floatToE4m3(f), "" + f);
            assertEquals((byte) 0xFE, NumberFormats.floatToE4m3(-f), "" + -f);
        }
        assertEquals((byte) 0x7F, (byte) (NumberFormats.floatToE4m3(Float.NaN) & 0x7F));
        assertEquals((byte) 0x00, NumberFormats.floatToE4m3(0f));
        assertEquals((byte) 0x80, NumberFormats.floatToE4m3(-0f));
    }

    /** Reference: the nearer of the two bf16 neighbours (truncation and truncation + 1 ulp), ties to the even one. */
    private static short bruteForceBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        int lo = bits & 0xFFFF0000;
        int hi = lo + 0x10000;
        double dLo = Math.abs((double) f - Float.intBitsToFloat(lo));
        double dHi = Math.abs((double) Float.intBitsToFloat(hi) - f);
        if (dLo < dHi || (dLo == dHi && ((lo >>> 16) & 1) == 0)) {
            return (short) (lo >>> 16);
        }
        return (short) (hi >>> 16);
    }

    @Test
    void bf16RoundsToNearestEven() {
        assertEquals((short) 0x3F80, NumberFormats.floatToBf16(1f));
        // 1 + 2^-8 is halfway between 1 (0x3F80, even) and 1 + 2^-7 (0x3F81): stays 1.
        assertEquals((short) 0x3F80, NumberFormats.floatToBf16(1f + 0x1p-8f));
        // 1 + 3*2^-8 is halfway between 0x3F81 (odd) and 0x3F82 (even): goes up.
        assertEquals((short) 0x3F82, NumberFormats.floatToBf16(1f + 3 * 0x1p-8f));
        // Just above a halfway point rounds up.
        assertEquals((short) 0x3F81, NumberFormats.floatToBf16(Math.nextUp(1f + 0x1p-8f)));
        assertEquals((short) 0xBF80, NumberFormats.floatToBf16(-1f - 0x1p-8f));
        assertEquals((short) 0x7F80, NumberFormats.floatToBf16(Float.POSITIVE_INFINITY));
        assertEquals((short) 0xFF80, NumberFormats.floatToBf16(Float.NEGATIVE_INFINITY));
        assertTrue(Float.isNaN(NumberFormats.bf16ToFloat(NumberFormats.floatToBf16(Float.NaN))));
        // A NaN whose payload lies only in the low 16 bits must not truncate to infinity.
        assertTrue(Float.isNaN(NumberFormats.bf16ToFloat(NumberFormats.floatToBf16(Float.intBitsToFloat(0x7F800001)))));
        assertEquals(1f, NumberFormats.bf16ToFloat((short) 0x3F80));
        assertEquals(-2f, NumberFormats.bf16ToFloat((short) 0xC000));
        assertEquals(3.140625f, NumberFormats.bf16ToFloat((short) 0x4049));

        SplittableRandom rnd = new SplittableRandom(7);
        for (int i = 0; i < 100_000; i++) {
            // Finite floats well inside the range, any low bits (incl. exact halfway patterns).
            int bits = (rnd.nextInt(0x01, 0xFE) << 23) | rnd.nextInt(1 << 23);
            if (i % 4 == 0) {
                bits = (bits & 0xFFFF0000) | 0x8000; // an exact tie
            }
            float f = Float.intBitsToFloat(rnd.nextBoolean() ? bits : bits | 0x80000000);
            assertEquals(
                    bruteForceBf16(f),
                    NumberFormats.floatToBf16(f),
                    () -> "0x" + Integer.toHexString(Float.floatToRawIntBits(f)));
        }
    }

    @Test
    void f16DecodesEveryBitPattern() {
        for (int h = 0; h < 65536; h++) {
            boolean negative = (h >> 15) != 0;
            int exp = (h >> 10) & 0x1F;
            int man = h & 0x3FF;
            double magnitude;
            if (exp == 0x1F) {
                magnitude = man == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
            } else if (exp == 0) {
                magnitude = man * 0x1p-24;
            } else {
                magnitude = (1 + man / 1024.0) * Math.scalb(1.0, exp - 15);
            }
            double want = negative ? -magnitude : magnitude;
            float got = NumberFormats.f16ToFloat((short) h);
            if (Double.isNaN(want)) {
                assertTrue(Float.isNaN(got), "0x" + Integer.toHexString(h));
            } else {
                assertEquals((float) want, got, "0x" + Integer.toHexString(h));
                assertEquals(
                        negative,
                        (Float.floatToRawIntBits(got) & 0x80000000) != 0,
                        "sign of 0x" + Integer.toHexString(h));
            }
        }
        assertEquals(65504f, NumberFormats.f16ToFloat((short) 0x7BFF));
        assertEquals(0x1p-14f, NumberFormats.f16ToFloat((short) 0x0400));
    }
}
