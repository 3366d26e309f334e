package dev.scorch.engine.device.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_STATUS_SUCCESS;
import static org.bytedeco.cuda.global.cudart.cudaDriverGetVersion;
import static org.bytedeco.cuda.global.cudart.cudaGetDeviceCount;
import static org.bytedeco.cuda.global.cudart.cudaGetErrorString;
import static org.bytedeco.cuda.global.cudart.cudaRuntimeGetVersion;

/** CUDA status checks, and whether this JVM can use CUDA at all. */
public final class Cuda {
    private Cuda() {}

    /** Whether CUDA can be used here, and why not when it cannot. */
    public record Availability(boolean available, int devices, String detail) {}

    private static volatile Availability probed;

    /**
     * Loads the CUDA runtime (the JNI wrappers and the machine's libcudart/libcuda) and counts GPUs, once per JVM.
     * Never throws: a machine without a driver or libraries gets available = false and the reason.
     */
    public static Availability probe() {
        Availability a = probed;
        if (a == null) {
            synchronized (Cuda.class) {
                a = probed;
                if (a == null) {
                    probed = a = doProbe();
                }
            }
        }
        return a;
    }

    private static Availability doProbe() {
        if (!CudaKernels.present()) {
            return new Availability(false, 0, "this jar was built without CUDA kernels (no nvcc at build time)");
        }
        try {
            int[] n = new int[1];
            int rc = cudaGetDeviceCount(n);
            if (rc != 0) {
                return new Availability(false, 0, "cudaGetDeviceCount: " + error(rc));
            }
            int[] driver = new int[1];
            int[] runtime = new int[1];
            cudaDriverGetVersion(driver);
            cudaRuntimeGetVersion(runtime);
            return new Availability(
                    n[0] > 0,
                    n[0],
                    n[0] + " GPU(s), driver CUDA " + version(driver[0]) + ", runtime " + version(runtime[0]));
        } catch (Throwable t) { // UnsatisfiedLinkError and friends: no libcudart / libcuda on this machine
            return new Availability(false, 0, "CUDA libraries not loadable: " + t);
        }
    }

    private static String version(int v) {
        return (v / 1000) + "." + (v % 1000) / 10;
    }

    static String error(int rc) {
        try {
            return rc + " (" + cudaGetErrorString(rc).getString() + ")";
        } catch (Throwable t) {
            return Integer.toString(rc);
        }
    }

    static void check(int rc, String what) {
        if (rc != 0) {
            throw new CudaException(what + " failed: CUDA error " + error(rc));
        }
    }

    static void checkDriver(int rc, String what) {
        if (rc != 0) {
            throw new CudaException(what + " failed: CUDA driver error " + rc);
        }
    }

    static void checkBlas(int rc, String what) {
        if (rc != CUBLAS_STATUS_SUCCESS) {
            throw new CudaException(what + " failed: cuBLAS status " + rc);
        }
    }

    /** A failed CUDA call, named. */
    public static final class CudaException extends RuntimeException {
        CudaException(String message) {
            super(message);
        }
    }
}
