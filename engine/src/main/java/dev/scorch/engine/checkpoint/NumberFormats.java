package dev.scorch.engine.checkpoint;

/** Conversions between fp32 and the narrow float formats checkpoints use (BF16, F16, FP8 E4M3FN). */
public final class NumberFormats {
    private NumberFormats() {}

    /** Every FP8 E4M3FN byte decoded: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7F/0xFF are NaN, no infinities. */
    private static final float[] E4M3 = new float[256];

    static {
        for (int b = 0; b < 256; b++) {
            int sign = (b >> 7) & 1;
            int exp = (b >> 3) & 0xF;
            int man = b & 0x7;
            float v;
            if (exp == 0xF && man == 0x7) {
                v = Float.NaN;
            } else if (exp == 0) {
                v = man / 8f * (float) Math.pow(2, -6); // subnormal
            } else {
                v = (1 + man / 8f) * (float) Math.pow(2, exp - 7);
            }
            E4M3[b] = sign == 1 ? -v : v;
        }
    }

    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /** f rounded to the nearest BF16 ({@link #floatToBf16}), as a float. */
    public static float roundToBf16(float f) {
        return bf16ToFloat(floatToBf16(f));
    }

    /** Round to nearest even, as torch's float→bfloat16 does; NaN stays NaN. */
    public static short floatToBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) {
            return (short) ((bits >>> 16) | 0x40);
        }
        int rounding = 0x7FFF + ((bits >>> 16) & 1);
        return (short) ((bits + rounding) >>> 16);
    }

    /** IEEE half to float (Float.float16ToFloat is Java 20+; the build targets 17). */
    public static float f16ToFloat(short bits) {
        int h = bits & 0xFFFF;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1F;
        int man = h & 0x3FF;
        if (exp == 0x1F) {
            return Float.intBitsToFloat(sign | 0x7F800000 | (man << 13));
        }
        if (exp == 0) {
            float v = man * 0x1p-24f; // subnormal (or zero)
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (man << 13));
    }

    public static float e4m3ToFloat(byte b) {
        return E4M3[b & 0xFF];
    }

    /**
     * Nearest E4M3FN value, ties to even, saturating at ±448 as torch's cast of finite values does. The code of
     * a normal value is ((exponent + 7) << 3) + rounded 3-bit mantissa; a mantissa that rounds up to 8 carries
     * into the exponent, and subnormals (step 2^-9) meet the normals seamlessly at code 8.
     */
    public static byte floatToE4m3(float f) {
        if (Float.isNaN(f)) {
            return 0x7F;
        }
        int sign = (Float.floatToRawIntBits(f) >>> 24) & 0x80;
        float a = Math.abs(f);
        int code;
        if (a >= 448f) {
            code = 0x7E;
        } else if (a < 0x1p-6f) {
            code = (int) Math.rint(a * 512f);
        } else {
            int e = Math.getExponent(a);
            float mant = a / (float) Math.scalb(1.0, e) - 1f;
            code = ((e + 7) << 3) + (int) Math.rint(mant * 8f);
            code = Math.min(code, 0x7E);
        }
        return (byte) (sign | code);
    }
}
