package dev.scorch.engine.bench;

import java.util.Locale;

/** MFU in words: a rate's share of a device's BF16 (and FP8) peak. */
public final class Mfu {
    private Mfu() {}

    /** "MFU 41.2 % of BF16 peak, 20.6 % of FP8 peak (H200 SXM)", or one figure where the peak has one. */
    public static String describe(DevicePeak peak, double flopsPerSecond) {
        double bf16 = 100 * peak.mfuBf16(flopsPerSecond);
        if (Double.isNaN(peak.fp8Flops()) || peak.fp8Flops() == peak.bf16Flops()) {
            return String.format(Locale.ROOT, "MFU %.2f %% of %s", bf16, peak.name());
        }
        return String.format(
                Locale.ROOT,
                "MFU %.2f %% of the BF16 peak, %.2f %% of the FP8 peak (%s)",
                bf16,
                100 * peak.mfuFp8(flopsPerSecond),
                peak.name());
    }
}
