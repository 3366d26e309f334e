package dev.scorch.engine.backend;

import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.cpu.CpuDevice;
import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.device.cuda.CudaDevice;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

/**
 * The backend one scoring task runs on, and why. {@link #choose} is a plain function of the mode asked for, the
 * GPU addresses Spark gave the task and CUDA's availability in this JVM, so every branch is testable without a GPU.
 *
 * @param kind       CPU or CUDA
 * @param gpuOrdinal the CUDA device ordinal (Spark's address as a number); -1 on the CPU
 * @param reason     why, in words, for the task's log line
 */
public record BackendChoice(Kind kind, int gpuOrdinal, String reason) {
    /** Where the engine runs. */
    public enum Kind {
        CPU,
        CUDA
    }

    public BackendChoice {
        if ((kind == Kind.CUDA) != (gpuOrdinal >= 0)) {
            throw new IllegalArgumentException(kind + " with GPU ordinal " + gpuOrdinal);
        }
    }

    public boolean cuda() {
        return kind == Kind.CUDA;
    }

    private static final Map<String, CpuOps> CPU_OPS = new ConcurrentHashMap<>();

    /**
     * The CPU kernels on this many engine threads in the precision asked (a job's --cpu-precision; null: this JVM's
     * default, -Dscorch.cpu.precision, else fp32), one set per JVM, thread count and precision: every task of an
     * executor shares its threads' pool and scratch. A mode this CPU cannot run gives fp32, as the kernel selection
     * decides and says why (logged once per executor and mode).
     */
    public static CpuOps cpuOps(int threads, CpuPrecision asked) {
        CpuPrecision runs = (asked == null
                        ? KernelSelection.current()
                        : SELECTIONS.computeIfAbsent(asked, a -> {
                            KernelSelection k = KernelSelection.current().withPrecision(a.id());
                            if (k.cpuPrecision() != a) {
                                System.getLogger(BackendChoice.class.getName())
                                        .log(
                                                System.Logger.Level.WARNING,
                                                "CPU precision " + a.id() + " asked, "
                                                        + k.cpuPrecision().id() + " runs: "
                                                        + k.precision().reason());
                            }
                            return k;
                        }))
                .cpuPrecision();
        return CPU_OPS.computeIfAbsent(threads + " " + runs.id(), key -> new CpuOps(threads, runs));
    }

    /** The kernel selection with each precision a task asked: made, and a fallback logged, once per JVM. */
    private static final Map<CpuPrecision, KernelSelection> SELECTIONS = new ConcurrentHashMap<>();

    /** The CPU device over {@link #cpuOps}: the engine's fast CPU kernels behind the device seam, in precision. */
    public static Device cpuDevice(int threads, CpuPrecision precision) {
        return new CpuDevice(cpuOps(threads, precision));
    }

    /** CUDA device ordinal, opened (its context, streams and cuBLAS handle). */
    public static Device cudaDevice(int ordinal) {
        return new CudaDevice(ordinal);
    }

    /**
     * Picks the backend. AUTO: CUDA on the task's first GPU address when it holds one and CUDA is available, else CPU
     * (reason "task holds no GPU" or "CUDA unavailable: ..."). CPU: always CPU. CUDA: the task's first address, or
     * ordinal 0 when Spark assigned none (local mode); fails naming the reason when CUDA is unavailable.
     *
     * @param gpuAddresses Spark's addresses of the task's "gpu" resource ("0", "1", ...); empty when it holds none.
     *                     A non-integer address is an error naming it.
     * @param cuda         CUDA's availability; called only when the answer depends on it (it loads native libraries)
     */
    public static BackendChoice choose(BackendMode mode, List<String> gpuAddresses, Supplier<Cuda.Availability> cuda) {
        List<String> addresses = gpuAddresses == null ? List.of() : gpuAddresses;
        switch (mode) {
            case CPU:
                return new BackendChoice(Kind.CPU, -1, "backend cpu asked for");
            case AUTO: {
                if (addresses.isEmpty()) {
                    return new BackendChoice(Kind.CPU, -1, "task holds no GPU");
                }
                int ordinal = ordinal(addresses.get(0));
                Cuda.Availability a = cuda.get();
                if (!a.available()) {
                    return new BackendChoice(
                            Kind.CPU,
                            -1,
                            "task holds GPU " + addresses.get(0) + " but CUDA unavailable: " + a.detail());
                }
                checkOrdinal(ordinal, a);
                return new BackendChoice(
                        Kind.CUDA, ordinal, "task holds GPU " + held(addresses) + "; CUDA: " + a.detail());
            }
            case CUDA: {
                int ordinal = addresses.isEmpty() ? 0 : ordinal(addresses.get(0));
                Cuda.Availability a = cuda.get();
                if (!a.available()) {
                    throw new IllegalStateException("--backend cuda: CUDA unavailable: " + a.detail());
                }
                checkOrdinal(ordinal, a);
                String where = addresses.isEmpty()
                        ? "Spark assigned the task no GPU, so GPU 0"
                        : "task holds GPU " + held(addresses);
                return new BackendChoice(
                        Kind.CUDA, ordinal, "backend cuda asked for; " + where + "; CUDA: " + a.detail());
            }
            default:
                throw new IllegalArgumentException("backend " + mode);
        }
    }

    private static String held(List<String> addresses) {
        return addresses.size() == 1 ? addresses.get(0) : addresses.get(0) + " (first of " + addresses + ")";
    }

    private static int ordinal(String address) {
        try {
            int n = Integer.parseInt(address.trim());
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // fall through
        }
        throw new IllegalArgumentException("GPU address '" + address
                + "' is not a CUDA device ordinal (0, 1, ...): check the" + " executor's GPU discovery script");
    }

    private static void checkOrdinal(int ordinal, Cuda.Availability a) {
        if (ordinal >= a.devices()) {
            throw new IllegalStateException(
                    "GPU address " + ordinal + " but CUDA sees " + a.devices() + " GPU(s) in this JVM (" + a.detail()
                            + "): are the executor's addresses renumbered by CUDA_VISIBLE_DEVICES?");
        }
    }
}
