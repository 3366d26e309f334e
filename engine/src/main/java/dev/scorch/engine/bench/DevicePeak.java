package dev.scorch.engine.bench;

import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * A device's peak dense matmul rate, against which the benchmark states its MFU (model FLOPs utilisation: the model's
 * FLOPs per second over this peak).
 *
 * <p>GPUs: NVIDIA's datasheet figures for the Tensor Cores, halved, since the datasheets give them with 2:4 structured
 * sparsity, which a dense GEMM does not use. H100 SXM5 and H200 SXM share the GH100 compute (132 SMs at the same
 * boost clock): BF16 1,979 and FP8 3,958 TFLOPS with sparsity, 989.4 and 1,978.9 dense. Sources: "NVIDIA H100 Tensor
 * Core GPU" datasheet (nvidia.com/en-us/data-center/h100/) and "NVIDIA H200 Tensor Core GPU" datasheet
 * (nvidia.com/en-us/data-center/h200/). The PCIe and NVL boards run slower clocks and are not in the table: pass their
 * peak with --peak-tflops.
 *
 * @param name        the device, as the benchmark prints it
 * @param bf16Flops   the dense BF16 peak, FLOP/s
 * @param fp8Flops    the dense FP8 peak, FLOP/s (NaN where the device has none)
 * @param source      where the figures come from, printed beside them
 */
public record DevicePeak(String name, double bf16Flops, double fp8Flops, String source) {
    private static final String DATASHEET = "NVIDIA datasheet, dense (half the 2:4-sparsity figure)";

    static final List<Entry> KNOWN = List.of(
            new Entry("H100 SXM", new String[] {"H100 80GB HBM3", "H100 SXM"}, 989.4e12, 1978.9e12),
            new Entry("H200 SXM", new String[] {"H200"}, 989.4e12, 1978.9e12));

    /** A known device: the substrings of CUDA's device name that mean it (case-insensitive). */
    record Entry(String name, String[] matches, double bf16, double fp8) {}

    /** The known peak of the CUDA device named deviceName (as cudaGetDeviceProperties gives it); empty if not known. */
    public static Optional<DevicePeak> ofCudaName(String deviceName) {
        String n = deviceName.toUpperCase(Locale.ROOT);
        if (n.contains("NVL") || n.contains("PCIE")) {
            return Optional.empty(); // other clocks than the SXM boards the table holds
        }
        for (Entry e : KNOWN) {
            for (String m : e.matches()) {
                if (n.contains(m.toUpperCase(Locale.ROOT))) {
                    return Optional.of(new DevicePeak(e.name(), e.bf16(), e.fp8(), DATASHEET));
                }
            }
        }
        return Optional.empty();
    }

    /** A peak the user states (--peak-tflops): the same figure for BF16 and FP8. */
    public static DevicePeak stated(String name, double tflops) {
        if (!(tflops > 0)) {
            throw new IllegalArgumentException("--peak-tflops " + tflops + ": must be > 0");
        }
        return new DevicePeak(name, tflops * 1e12, tflops * 1e12, "stated with --peak-tflops");
    }

    /** The model's FLOP/s as a fraction of the BF16 peak. */
    public double mfuBf16(double flopsPerSecond) {
        return flopsPerSecond / bf16Flops;
    }

    /** The model's FLOP/s as a fraction of the FP8 peak (NaN where there is none). */
    public double mfuFp8(double flopsPerSecond) {
        return flopsPerSecond / fp8Flops;
    }

    /** "H200 SXM: BF16 989.4 TFLOP/s, FP8 1978.9 TFLOP/s (source)"; a peak under 1 TFLOP/s in GFLOP/s. */
    public String describe() {
        String fp8 = Double.isNaN(fp8Flops) || fp8Flops == bf16Flops ? "" : ", FP8 " + rate(fp8Flops);
        String bf16 = fp8.isEmpty() ? "" : "BF16 ";
        return String.format(Locale.ROOT, "%s: %s%s%s (%s)", name, bf16, rate(bf16Flops), fp8, source);
    }

    /** FLOP/s in words: "989.4 TFLOP/s", "69.8 GFLOP/s". */
    public static String rate(double flopsPerSecond) {
        return flopsPerSecond >= 1e12
                ? String.format(Locale.ROOT, "%.1f TFLOP/s", flopsPerSecond / 1e12)
                : String.format(Locale.ROOT, "%.1f GFLOP/s", flopsPerSecond / 1e9);
    }
}
