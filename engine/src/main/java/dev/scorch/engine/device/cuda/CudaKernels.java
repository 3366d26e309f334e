package dev.scorch.engine.device.cuda;

import static org.bytedeco.cuda.global.cudart.cuLaunchKernel;
import static org.bytedeco.cuda.global.cudart.cuModuleGetFunction;
import static org.bytedeco.cuda.global.cudart.cuModuleLoadData;
import static org.bytedeco.cuda.global.cudart.cuModuleUnload;

import dev.scorch.engine.device.Buf;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.cuda.cudart.CUfunc_st;
import org.bytedeco.cuda.cudart.CUmod_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;

/**
 * Scorch's kernels (src/main/cuda/scorch_kernels.cu, compiled by nvcc at build time into the fatbin beside this
 * class) loaded into the current CUDA context, and launched by name with their arguments.
 */
final class CudaKernels implements AutoCloseable {
    static final String FATBIN = "scorch_kernels.fatbin";

    private final CUmod_st module;
    private final CUstream_st stream; // every launch's; null: the legacy default stream
    private static final int MAX_ARGS = 16;

    private final Map<String, CUfunc_st> functions = new HashMap<>();
    private final LongPointer slots = new LongPointer(MAX_ARGS); // argument values
    private final PointerPointer<Pointer> params = new PointerPointer<>(MAX_ARGS); // params[i] = &slots[i]

    private CudaKernels(CUmod_st module, CUstream_st stream) {
        this.module = module;
        this.stream = stream;
        for (int i = 0; i < MAX_ARGS; i++) {
            params.put(i, new DevicePointer(slots.address() + 8L * i));
        }
    }

    /** Whether the jar carries the compiled kernels. */
    static boolean present() {
        return CudaKernels.class.getResource(FATBIN) != null;
    }

    /** Loads the fatbin into the context current on this thread; launches go to stream (null: the default one). */
    static CudaKernels load(CUstream_st stream) {
        byte[] image;
        try (InputStream in = CudaKernels.class.getResourceAsStream(FATBIN)) {
            if (in == null) {
                throw new IllegalStateException(
                        "the CUDA kernels (" + FATBIN + ") are not in this jar: it was built without nvcc");
            }
            image = in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        CUmod_st module = new CUmod_st();
        try (BytePointer bytes = new BytePointer(image)) {
            Cuda.checkDriver(cuModuleLoadData(module, bytes), "cuModuleLoadData(" + FATBIN + ")");
        }
        return new CudaKernels(module, stream);
    }

    private CUfunc_st function(String name) {
        return functions.computeIfAbsent(name, n -> {
            CUfunc_st f = new CUfunc_st();
            Cuda.checkDriver(cuModuleGetFunction(f, module, n), "cuModuleGetFunction(" + n + ")");
            return f;
        });
    }

    /**
     * Launches kernel name on a (gridX, gridY) grid of block threads with shared bytes of dynamic shared memory,
     * on the stream. Arguments: {@link Buf} and {@link Pointer} (device addresses), Integer, Long, Float.
     */
    synchronized void launch(String name, int gridX, int gridY, int block, int shared, Object... args) {
        if (gridX == 0 || gridY == 0) {
            return;
        }
        if (args.length > MAX_ARGS) {
            throw new IllegalArgumentException(name + ": " + args.length + " arguments, at most " + MAX_ARGS);
        }
        CUfunc_st f = function(name);
        // Each argument goes into its own 8-byte slot (little-endian: an int or float in the slot's first bytes);
        // params[i] points at slot i, and cuLaunchKernel copies the values before it returns.
        for (int i = 0; i < args.length; i++) {
            Object a = args[i];
            long v;
            if (a instanceof Buf b) {
                v = CudaDevice.ptr(b).address();
            } else if (a instanceof Pointer p) {
                v = p.address();
            } else if (a instanceof Integer x) {
                v = x;
            } else if (a instanceof Long x) {
                v = x;
            } else if (a instanceof Float x) {
                v = Float.floatToRawIntBits(x) & 0xFFFF_FFFFL;
            } else {
                throw new IllegalArgumentException(name + " argument " + i + ": unsupported " + a);
            }
            slots.put(i, v);
        }
        Cuda.checkDriver(
                cuLaunchKernel(f, gridX, gridY, 1, block, 1, 1, shared, stream, params, (PointerPointer<?>) null),
                "cuLaunchKernel(" + name + ", grid " + gridX + "x" + gridY + ", block " + block + ")");
    }

    @Override
    public void close() {
        cuModuleUnload(module);
        slots.close();
        params.close();
    }
}
