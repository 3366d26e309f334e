package dev.scorch.engine.device.cuda;

import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F;
import static org.bytedeco.cuda.global.cublas.CUBLAS_COMPUTE_32F_PEDANTIC;
import static org.bytedeco.cuda.global.cublas.CUBLAS_GEMM_DEFAULT;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_N;
import static org.bytedeco.cuda.global.cublas.CUBLAS_OP_T;
import static org.bytedeco.cuda.global.cublas.cublasCreate_v2;
import static org.bytedeco.cuda.global.cublas.cublasDestroy_v2;
import static org.bytedeco.cuda.global.cublas.cublasGemmBatchedEx;
import static org.bytedeco.cuda.global.cublas.cublasGemmEx;
import static org.bytedeco.cuda.global.cublas.cublasSetStream_v2;
import static org.bytedeco.cuda.global.cublas.cublasSetWorkspace_v2;
import static org.bytedeco.cuda.global.cudart.CUDA_R_16BF;
import static org.bytedeco.cuda.global.cudart.CUDA_R_32F;
import static org.bytedeco.cuda.global.cudart.cudaDeviceCanAccessPeer;
import static org.bytedeco.cuda.global.cudart.cudaDeviceEnablePeerAccess;
import static org.bytedeco.cuda.global.cudart.cudaDeviceSynchronize;
import static org.bytedeco.cuda.global.cudart.cudaErrorPeerAccessAlreadyEnabled;
import static org.bytedeco.cuda.global.cudart.cudaFree;
import static org.bytedeco.cuda.global.cudart.cudaGetDeviceProperties;
import static org.bytedeco.cuda.global.cudart.cudaGetLastError;
import static org.bytedeco.cuda.global.cudart.cudaGraphDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphExecDestroy;
import static org.bytedeco.cuda.global.cudart.cudaGraphInstantiate;
import static org.bytedeco.cuda.global.cudart.cudaGraphLaunch;
import static org.bytedeco.cuda.global.cudart.cudaMalloc;
import static org.bytedeco.cuda.global.cudart.cudaMemGetInfo;
import static org.bytedeco.cuda.global.cudart.cudaMemcpy;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyDeviceToHost;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyHostToDevice;
import static org.bytedeco.cuda.global.cudart.cudaMemcpyPeerAsync;
import static org.bytedeco.cuda.global.cudart.cudaMemset;
import static org.bytedeco.cuda.global.cudart.cudaSetDevice;
import static org.bytedeco.cuda.global.cudart.cudaStreamBeginCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamCaptureModeThreadLocal;
import static org.bytedeco.cuda.global.cudart.cudaStreamCreate;
import static org.bytedeco.cuda.global.cudart.cudaStreamDestroy;
import static org.bytedeco.cuda.global.cudart.cudaStreamEndCapture;
import static org.bytedeco.cuda.global.cudart.cudaStreamSynchronize;

import dev.scorch.engine.checkpoint.NumberFormats;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.DequantPlan;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.DeviceGraph;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.KeyTiles;
import dev.scorch.engine.device.MlaShape;
import dev.scorch.engine.device.MoeShape;
import dev.scorch.engine.device.PackedFp8;
import dev.scorch.engine.device.PackedInt4;
import dev.scorch.engine.device.Rotary;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.kernels.Linear;
import java.util.function.LongFunction;
import org.bytedeco.cuda.cublas.cublasContext;
import org.bytedeco.cuda.cudart.CUgraphExec_st;
import org.bytedeco.cuda.cudart.CUgraph_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.cudart.cudaDeviceProp;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerPointer;
import org.bytedeco.javacpp.ShortPointer;
import org.bytedeco.javacpp.SizeTPointer;

/**
 * {@link Device} on one NVIDIA GPU through JavaCPP's CUDA presets: memory with cudaMalloc, GEMMs with cuBLAS
 * (BF16 tensor-core GEMMs with fp32 accumulate, or pedantic fp32), every other kernel from Scorch's fatbin
 * ({@link CudaKernels}). Work goes to the legacy default stream, so it runs in call order and every read back waits
 * for it; with {@link #GRAPHS}, kernels and GEMMs go to a stream of the device's own instead, a blocking one (the
 * synchronous copies, memsets and frees on the legacy stream wait for it and it for them, so the order is the same),
 * which {@link #capture} records graphs from. Each call first makes this device current on the calling thread (Spark runs tasks on many
 * threads); callers serialise their use of one instance.
 */
public final class CudaDevice implements Device {
    private static final int BLOCK = 256; // log_softmax_stats and the block reductions assume it
    /** Experts as cuBLAS batched GEMMs (-Dscorch.cuda.batched-experts=true; {@link KernelSelection} says why not by default). */
    static final boolean BATCHED_EXPERTS = KernelSelection.current().cudaBatchedExperts();
    /** Experts through moe_gemm, group bounds on the device (-Dscorch.cuda.moe-gemm=true; else one cuBLAS GEMM each). */
    static final boolean MOE_GEMM = KernelSelection.moeGemm(System.getProperty(KernelSelection.CUDA_MOE_GEMM));
    /**
     * {@link #copyTo} another CUDA device by cudaMemcpyPeerAsync (-Dscorch.cuda.peer-copy=true; else through the host,
     * until the device check has passed it).
     */
    public static final boolean PEER_COPY = Boolean.getBoolean("scorch.cuda.peer-copy");

    private static final int ATTN_THREADS = 128; // as scorch_kernels.cu's ATTN_THREADS, ATTN_MAX_QK, ATTN_MAX_V
    private static final int ATTN_MAX_QK = 192;
    private static final int ATTN_MAX_V = 128;
    private static final int MAX_EXPERTS = 512; // as scorch_kernels.cu's MAX_EXPERTS
    private static final int MG_TM = 64; // moe_gemm's row and column tiles (MG_TM, MG_TN)
    private static final int MG_TN = 64;
    private static final int DEC_THREADS = 256; // as scorch_kernels.cu's DEC_THREADS (DEC_WARPS = DEC_THREADS / 32)
    private static final int DEC_WARPS = DEC_THREADS / 32;
    // Dynamic shared memory a launch may take without opting in: 48 KiB, less the kernels' static arrays.
    private static final int DEC_MAX_SHARED = 47 << 10;

    private final int ordinal;
    private final String description;
    private final CudaKernels kernels;
    private final cublasContext cublas = new cublasContext();
    /**
     * -Dscorch.cuda.graphs=true: the device's own stream and {@link #capture} as CUDA graphs (off, capture runs the step
     * again at each launch), as decode steps use them ({@link DeviceGraph#GRAPHS}).
     */
    public static final boolean GRAPHS = Boolean.getBoolean(DeviceGraph.GRAPHS);

    private final CUstream_st stream; // with GRAPHS; else null, the legacy default stream
    private boolean capturing; // a graph is being captured from the stream: host operations are refused
    private static final long CUBLAS_WORKSPACE = 32L << 20; // cuBLAS's own with GRAPHS, so a capture allocates none
    private Pointer cublasWorkspace;
    private int scratchEpoch; // counts reallocations of the GEMM scratch, whose addresses a graph holds
    private final FloatPointer one = new FloatPointer(1f);
    private final FloatPointer zero = new FloatPointer(0f);
    private Pointer bf16Scratch; // GEMM inputs rounded to BF16
    private Pointer dequantScratch; // INT4 or FP8 weights dequantised, one GEMM tile
    private long dequantScratchBytes;
    private Pointer ptrDev; // grouped GEMM pointer arrays
    private long ptrDevElems;
    private boolean groupedRefused; // cuBLAS refused a batched GEMM here: every group runs alone from then on
    private final java.util.Map<Buf[], java.util.Map<GemmPrecision, ExpertTable>> expertTables =
            new java.util.IdentityHashMap<>();
    private Buf tileStart; // moe_gemm's row tiles per expert [experts + 1]
    private Buf guScratch; // without -Dscorch.cuda.moe-gemm=true: one expert's gate|up rows before SwiGLU
    private LongPointer stageL = new LongPointer(0);
    private long bf16ScratchElems;
    private FloatPointer stageF = new FloatPointer(0);
    private IntPointer stageI = new IntPointer(0);
    private ShortPointer stageS = new ShortPointer(0);

    /** Opens GPU ordinal (as Spark's resource addresses number them) and loads the kernels. */
    public CudaDevice(int ordinal) {
        this.ordinal = ordinal;
        bind();
        cudaDeviceProp prop = new cudaDeviceProp();
        Cuda.check(cudaGetDeviceProperties(prop, ordinal), "cudaGetDeviceProperties");
        description = "cuda:" + ordinal + " " + prop.name().getString().trim() + " (sm_" + prop.major() + prop.minor()
                + ", " + prop.multiProcessorCount() + " SMs, " + (prop.totalGlobalMem() >> 20) + " MiB)";
        stream = GRAPHS ? new CUstream_st() : null;
        if (stream != null) {
            Cuda.check(cudaStreamCreate(stream), "cudaStreamCreate");
        }
        kernels = CudaKernels.load(stream);
        Cuda.checkBlas(cublasCreate_v2(cublas), "cublasCreate");
        if (stream != null) {
            Cuda.checkBlas(cublasSetStream_v2(cublas, stream), "cublasSetStream");
            cublasWorkspace = new Pointer();
            Cuda.check(cudaMalloc(cublasWorkspace, CUBLAS_WORKSPACE), "cudaMalloc(cuBLAS workspace)");
            Cuda.checkBlas(cublasSetWorkspace_v2(cublas, cublasWorkspace, CUBLAS_WORKSPACE), "cublasSetWorkspace");
        }
    }

    /** The device each thread last made current through this class. */
    private static final ThreadLocal<Integer> CURRENT = new ThreadLocal<>();

    private void bind() {
        Integer current = CURRENT.get();
        if (current == null || current != ordinal) {
            Cuda.check(cudaSetDevice(ordinal), "cudaSetDevice(" + ordinal + ")");
            CURRENT.set(ordinal);
        }
    }

    @Override
    public String describe() {
        return description;
    }

    @Override
    public long totalBytes() {
        return memInfo()[1];
    }

    @Override
    public long freeBytes() {
        return memInfo()[0];
    }

    private long[] memInfo() {
        bind();
        try (SizeTPointer free = new SizeTPointer(1);
                SizeTPointer total = new SizeTPointer(1)) {
            Cuda.check(cudaMemGetInfo(free, total), "cudaMemGetInfo");
            return new long[] {free.get(), total.get()};
        }
    }

    // --- Memory

    @Override
    public Buf alloc(Buf.Kind kind, long n) {
        if (kind == Buf.Kind.INT4 || kind == Buf.Kind.FP8) {
            throw new IllegalArgumentException(kind + " weights come from int4Weight or fp8Weight, not alloc");
        }
        host("alloc");
        long bytes = Math.max(1, n) * kind.bytes();
        Pointer p = new Pointer();
        Cuda.check(cudaMalloc(p, bytes), "cudaMalloc(" + bytes + " bytes) on " + description);
        Cuda.check(cudaMemset(p, 0, bytes), "cudaMemset");
        return new Buf(new DevicePointer(p.address()), kind, 0, n);
    }

    @Override
    public void free(Buf b) {
        if (b.storage() instanceof PackedInt4 p) {
            free(p.packed());
            free(p.scales());
            return;
        }
        if (b.storage() instanceof PackedFp8 p) {
            free(p.codes());
            free(p.scales());
            free(p.scaleRows());
            return;
        }
        host("free");
        if (b.offset() != 0) {
            throw new IllegalArgumentException("free takes a whole allocation, not a slice");
        }
        Cuda.check(cudaFree(ptr(b)), "cudaFree");
    }

    @Override
    public void zero(Buf b) {
        host("zero");
        Cuda.check(cudaMemset(ptr(b), 0, b.bytes()), "cudaMemset");
    }

    @Override
    public void write(Buf dst, float[] src, int off, int n) {
        dst.need(Buf.Kind.F32, n, "write");
        host("write");
        stageF = grow(stageF, n, FloatPointer::new);
        stageF.put(src, off, n);
        Cuda.check(cudaMemcpy(ptr(dst), stageF, (long) n * 4, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    }

    @Override
    public void write(Buf dst, int[] src, int off, int n) {
        dst.need(Buf.Kind.I32, n, "write");
        host("write");
        stageI = grow(stageI, n, IntPointer::new);
        stageI.put(src, off, n);
        Cuda.check(cudaMemcpy(ptr(dst), stageI, (long) n * 4, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    }

    @Override
    public void read(Buf src, float[] dst, int off, int n) {
        src.need(Buf.Kind.F32, n, "read");
        host("read");
        stageF = grow(stageF, n, FloatPointer::new);
        Cuda.check(cudaMemcpy(stageF, ptr(src), (long) n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
        stageF.get(dst, off, n);
    }

    @Override
    public void read(Buf src, int[] dst, int off, int n) {
        src.need(Buf.Kind.I32, n, "read");
        host("read");
        stageI = grow(stageI, n, IntPointer::new);
        Cuda.check(cudaMemcpy(stageI, ptr(src), (long) n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
        stageI.get(dst, off, n);
    }

    @Override
    public boolean copyTo(Buf src, Device to, Buf dst, long n) {
        if (!PEER_COPY || !(to instanceof CudaDevice peer)) {
            return false;
        }
        peerCopy(src, peer, dst, n);
        return true;
    }

    /** Pairs (this ordinal, peer ordinal) whose peer access has been looked at (enabled where the GPUs allow it). */
    private static final java.util.Set<Long> PEERS = java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * dst[:n] = src[:n] on peer, copied on this device's stream (after the work queued on it, not waiting for peer's),
     * with peer access enabled where cudaDeviceCanAccessPeer allows it (else the driver stages the copy); returns once
     * the copy is done, so peer's next work may read dst.
     */
    public void peerCopy(Buf src, CudaDevice peer, Buf dst, long n) {
        src.need(Buf.Kind.F32, n, "peerCopy");
        dst.need(Buf.Kind.F32, n, "peerCopy");
        host("peerCopy");
        if (peer.ordinal != ordinal && PEERS.add(((long) ordinal << 32) | peer.ordinal)) {
            int[] can = new int[1];
            Cuda.check(cudaDeviceCanAccessPeer(can, ordinal, peer.ordinal), "cudaDeviceCanAccessPeer");
            if (can[0] != 0) {
                int rc = cudaDeviceEnablePeerAccess(peer.ordinal, 0);
                if (rc == cudaErrorPeerAccessAlreadyEnabled) {
                    cudaGetLastError(); // clears it: another instance on this GPU enabled it first
                } else {
                    Cuda.check(rc, "cudaDeviceEnablePeerAccess(" + peer.ordinal + ")");
                }
            }
        }
        Cuda.check(
                cudaMemcpyPeerAsync(ptr(dst), peer.ordinal, ptr(src), ordinal, n * 4, stream),
                "cudaMemcpyPeerAsync cuda:" + ordinal + " to cuda:" + peer.ordinal);
        Cuda.check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }

    @Override
    public void writeAddresses(Buf dst, Buf[] src) {
        dst.need(Buf.Kind.ADDR, src.length, "writeAddresses");
        host("writeAddresses");
        long[] a = new long[src.length];
        for (int i = 0; i < a.length; i++) {
            a[i] = ptr(src[i]).address();
        }
        stageL = grow(stageL, a.length, LongPointer::new);
        stageL.put(a, 0, a.length);
        Cuda.check(cudaMemcpy(ptr(dst), stageL, a.length * 8L, cudaMemcpyHostToDevice), "cudaMemcpy addresses");
    }

    /** Makes this device current; refuses op while a graph is being captured (it would break or escape the capture). */
    private void host(String op) {
        if (capturing) {
            throw new IllegalStateException(op + " while capturing a CUDA graph: a captured step makes no host reads,"
                    + " writes, allocations or synchronisation");
        }
        bind();
    }

    /**
     * A CUDA graph of step's work on the stream (cudaStreamBeginCapture, thread-local mode, to cudaStreamEndCapture),
     * instantiated. A launch whose graph was captured before the GEMM scratch was reallocated (a larger GEMM ran since)
     * captures step again first: the graph holds the scratch's old addresses.
     */
    @Override
    public DeviceGraph capture(Runnable step) {
        if (stream == null) {
            return Device.super.capture(step);
        }
        return new DeviceGraph() {
            private CUgraphExec_st exec = instantiate(step);
            private int epoch = scratchEpoch;

            @Override
            public void launch() {
                bind();
                if (exec == null) {
                    throw new IllegalStateException("launch of a closed CUDA graph");
                }
                if (epoch != scratchEpoch) {
                    cudaGraphExecDestroy(exec);
                    exec = null;
                    exec = instantiate(step);
                    epoch = scratchEpoch;
                }
                Cuda.check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
            }

            @Override
            public void close() {
                if (exec != null) {
                    bind();
                    cudaGraphExecDestroy(exec);
                    exec = null;
                }
            }
        };
    }

    private CUgraphExec_st instantiate(Runnable step) {
        host("capture");
        Cuda.check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        CUgraph_st graph = new CUgraph_st();
        capturing = true;
        try {
            step.run();
        } catch (RuntimeException | Error e) {
            capturing = false;
            if (cudaStreamEndCapture(stream, graph) == 0 && !graph.isNull()) {
                cudaGraphDestroy(graph);
            }
            throw e;
        }
        capturing = false;
        Cuda.check(cudaStreamEndCapture(stream, graph), "cudaStreamEndCapture");
        try {
            CUgraphExec_st exec = new CUgraphExec_st();
            Cuda.check(cudaGraphInstantiate(exec, graph, 0L), "cudaGraphInstantiate");
            return exec;
        } finally {
            cudaGraphDestroy(graph);
        }
    }

    /** Refuses to reallocate GEMM scratch inside a capture; else counts the reallocation (graphs recapture). */
    private void scratchGrows(String what) {
        if (capturing) {
            throw new IllegalStateException(what + " grows while capturing a CUDA graph: run the step once first");
        }
        scratchEpoch++;
    }

    /** p from position 0 when it holds n elements, else a new one of at least twice its capacity (p is closed). */
    private static <P extends Pointer> P grow(P p, long n, LongFunction<P> make) {
        if (p.capacity() >= n) {
            return p.position(0);
        }
        p.close();
        return make.apply(Math.max(n, 2 * p.capacity()));
    }

    /** A device array of device pointers, as the void** argument cuBLAS reads it from. */
    private static PointerPointer<Pointer> deviceArray(long address) {
        return new PointerPointer<>(new DevicePointer(address));
    }

    /** Decodes the weight a block of rows at a time (FP8 or INT4 scales applied) and uploads it in the precision's dtype. */
    @Override
    public Buf denseWeight(GemmPrecision precision, Linear... stacked) {
        long total = 0;
        for (Linear w : stacked) {
            total += (long) w.out() * w.in();
        }
        Buf b = alloc(precision.bf16Weights() ? Buf.Kind.BF16 : Buf.Kind.F32, total);
        long at = 0;
        for (Linear w : stacked) {
            upload(w, precision, b.slice(at, (long) w.out() * w.in()));
            at += (long) w.out() * w.in();
        }
        return b;
    }

    private void upload(Linear w, GemmPrecision precision, Buf b) {
        int in = w.in();
        int rowsPerBlock = Math.max(1, (4 << 20) / in);
        float[] rows = new float[rowsPerBlock * in];
        short[] bf16 = precision.bf16Weights() ? new short[rows.length] : null;
        for (int r0 = 0; r0 < w.out(); r0 += rowsPerBlock) {
            int n = Math.min(rowsPerBlock, w.out() - r0);
            for (int r = 0; r < n; r++) {
                w.row(r0 + r, 0, in, rows, r * in);
            }
            int elems = n * in;
            long at = (long) r0 * in;
            if (bf16 != null) {
                writeBf16(b.slice(at, elems), rows, elems, bf16, "cudaMemcpy weight " + w.name());
            } else {
                write(b.slice(at, elems), rows, 0, elems);
            }
        }
    }

    @Override
    public Buf weight(float[] w, GemmPrecision precision) {
        if (!precision.bf16Weights()) {
            return upload(w);
        }
        Buf b = alloc(Buf.Kind.BF16, w.length);
        writeBf16(b, w, w.length, new short[w.length], "cudaMemcpy weight");
        return b;
    }

    /** dst (BF16) = src[0 .. n) rounded to BF16, through bf16 (n shorts or more) and the staging buffer. */
    private void writeBf16(Buf dst, float[] src, int n, short[] bf16, String what) {
        for (int i = 0; i < n; i++) {
            bf16[i] = NumberFormats.floatToBf16(src[i]);
        }
        bind();
        stageS = grow(stageS, n, ShortPointer::new);
        stageS.put(bf16, 0, n);
        Cuda.check(cudaMemcpy(ptr(dst), stageS, n * 2L, cudaMemcpyHostToDevice), what);
    }

    // --- Kernels

    @Override
    public void gemm(Buf x, int m, int k, Buf w, int n, Buf y, GemmPrecision precision) {
        if (m == 0) {
            return;
        }
        x.need(Buf.Kind.F32, (long) m * k, "gemm x");
        y.need(Buf.Kind.F32, (long) m * n, "gemm y");
        if (w.storage() instanceof PackedInt4 p) {
            p.check(n, k);
            dequantGemm(x, m, k, n, y, p.plan(precision), (r0, elems, tile, parts, stride) -> {
                int scaleBf16 = p.scales().kind() == Buf.Kind.BF16 ? 1 : 0;
                if (parts == 0) {
                    kernels.launch(
                            "int4_dequant_f32",
                            grid(elems),
                            1,
                            BLOCK,
                            0,
                            p.packed(),
                            p.scales(),
                            scaleBf16,
                            p.wordsPerRow(),
                            p.groupsPerRow(),
                            p.groupSize(),
                            k,
                            (long) r0,
                            elems,
                            tile);
                } else {
                    kernels.launch(
                            "int4_dequant_bf16",
                            grid(elems),
                            1,
                            BLOCK,
                            0,
                            p.packed(),
                            p.scales(),
                            scaleBf16,
                            p.wordsPerRow(),
                            p.groupsPerRow(),
                            p.groupSize(),
                            k,
                            (long) r0,
                            elems,
                            tile,
                            new DevicePointer(tile.address() + stride),
                            parts > 1 ? 1 : 0);
                }
            });
            return;
        }
        if (w.storage() instanceof PackedFp8 p) {
            p.check(n, k);
            dequantGemm(x, m, k, n, y, p.plan(precision), (r0, elems, tile, parts, stride) -> {
                if (parts == 0) {
                    kernels.launch(
                            "fp8_dequant_f32",
                            grid(elems),
                            1,
                            BLOCK,
                            0,
                            p.codes(),
                            p.scales(),
                            p.scaleRows(),
                            p.scaleCols(),
                            p.blockCols(),
                            k,
                            (long) r0,
                            elems,
                            tile);
                } else {
                    kernels.launch(
                            "fp8_dequant_bf16",
                            grid(elems),
                            1,
                            BLOCK,
                            0,
                            p.codes(),
                            p.scales(),
                            p.scaleRows(),
                            p.scaleCols(),
                            p.blockCols(),
                            k,
                            (long) r0,
                            elems,
                            tile,
                            stride,
                            parts);
                }
            });
            return;
        }
        w.need(w.kind(), (long) n * k, "gemm w");
        bind();
        // Row-major y[m, n] = x[m, k] · w[n, k]ᵀ is column-major yᵀ[n, m] = w[k, n]ᵀ · xᵀ[k, m].
        if (w.kind() == Buf.Kind.BF16) {
            // x ≈ p0 + p1 + p2 in BF16; y = w·p0, then y += w·p1, y += w·p2 (beta = 1).
            int parts = Math.max(1, precision.inputParts());
            DevicePointer[] p = split(x, (long) m * k, parts);
            for (int i = 0; i < parts; i++) {
                gemmEx(m, k, ptr(w), p[i], true, n, ptr(y), n, i == 0 ? zero : one, "cublasGemmEx BF16");
            }
        } else {
            gemmEx(m, k, ptr(w), ptr(x), false, n, ptr(y), n, zero, "cublasGemmEx FP32");
        }
    }

    /** Launches the dequantisation kernel of a packed weight's rows [r0, r0 + elems / k) into the scratch tile. */
    private interface Dequantiser {
        /** parts 0: fp32 weights; else that many BF16 parts, part a at tile + a · stride bytes. */
        void tile(int r0, long elems, DevicePointer tile, int parts, long stride);
    }

    /**
     * A packed weight's GEMM ({@link DequantPlan}): per tile of weight rows, its dequantisation kernel into the scratch
     * (fp32, or the BF16 parts, each 256-byte aligned for the tensor-core GEMMs), then the plan's cuBLAS GEMMs into that
     * tile's columns of y (ldc n), the first with beta 0: w_a · p_b for a &lt; weightParts, b &lt; inputParts − a.
     */
    private void dequantGemm(Buf x, int m, int k, int n, Buf y, DequantPlan plan, Dequantiser dequant) {
        bind();
        int tileRows = DequantPlan.tileRows(n, k);
        long tileElems = (long) tileRows * k;
        long stride = (tileElems * 2 + 255) / 256 * 256; // one BF16 part
        long need = plan.fp32() ? plan.scratchBytes(tileElems) : (plan.weightParts() - 1) * stride + tileElems * 2;
        if (dequantScratchBytes < need) {
            scratchGrows("the dequantisation scratch");
            if (dequantScratch != null) {
                Cuda.check(cudaFree(dequantScratch), "cudaFree");
            }
            dequantScratch = new Pointer();
            Cuda.check(cudaMalloc(dequantScratch, need), "cudaMalloc(dequantisation scratch, " + need + " bytes)");
            dequantScratchBytes = need;
        }
        DevicePointer tile = new DevicePointer(dequantScratch.address());
        DevicePointer[] parts = plan.fp32() ? null : split(x, (long) m * k, plan.inputParts());
        for (int r0 = 0; r0 < n; r0 += tileRows) {
            int nb = Math.min(tileRows, n - r0);
            long elems = (long) nb * k;
            DevicePointer yTile = new DevicePointer(ptr(y).address() + 4L * r0);
            dequant.tile(r0, elems, tile, plan.weightParts(), stride);
            if (plan.fp32()) {
                gemmEx(m, k, tile, ptr(x), false, nb, yTile, n, zero, "cublasGemmEx dequantised FP32");
                continue;
            }
            boolean first = true;
            for (int a = 0; a < plan.weightParts(); a++) {
                for (int b = 0; b < plan.inputParts() - a; b++) {
                    DevicePointer wa = new DevicePointer(tile.address() + a * stride);
                    gemmEx(m, k, wa, parts[b], true, nb, yTile, n, first ? zero : one, "cublasGemmEx dequantised BF16");
                    first = false;
                }
            }
        }
    }

    /** Bytes of the dequantisation scratch now (it only grows, to the largest tile a GEMM has needed). */
    public long dequantScratchBytes() {
        return dequantScratchBytes;
    }

    /** x's first elems values split into parts BF16 arrays (scratch, valid until the next GEMM). */
    private DevicePointer[] split(Buf x, long elems, int parts) {
        long need = parts * elems;
        if (bf16ScratchElems < need) {
            scratchGrows("the BF16 GEMM scratch");
            if (bf16Scratch != null) {
                Cuda.check(cudaFree(bf16Scratch), "cudaFree");
            }
            bf16ScratchElems = Math.max(need, 2 * bf16ScratchElems);
            bf16Scratch = new Pointer();
            Cuda.check(cudaMalloc(bf16Scratch, bf16ScratchElems * 2), "cudaMalloc(BF16 GEMM scratch)");
        }
        DevicePointer[] p = new DevicePointer[3];
        for (int i = 0; i < 3; i++) {
            p[i] = new DevicePointer(bf16Scratch.address() + Math.min(i, parts - 1) * elems * 2);
        }
        kernels.launch("split_bf16", grid(elems), 1, BLOCK, 0, x, p[0], p[1], p[2], parts, elems);
        return p;
    }

    /**
     * With {@link #BATCHED_EXPERTS}, BF16 groups at a uniform stride run as cuBLAS batched GEMMs (cublasGemmBatchedEx:
     * BF16 in, fp32 out, fp32 compute; the grouped API, cublasGemmGroupedBatchedEx, refused that type combination
     * with status 15 on the device check); other layouts, FP32 weights, and the default run one GEMM per group.
     */
    @Override
    public void gemmGrouped(Buf x, int[] rowStart, int[] rows, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        int groups = w.length;
        if (groups == 0) {
            return;
        }
        bind();
        // FP32 weights run one GEMM per group: the grouped call hit an illegal address on the device check's
        // first FP32 forward (the BF16 modes ran it cleanly), and FP32 is the slow reference mode anyway.
        if (BATCHED_EXPERTS && w[0].kind() == Buf.Kind.BF16 && !groupedRefused) {
            int status = grouped(x, rowStart, rows, k, w, n, y, precision);
            if (status == 0) {
                return;
            }
            if (status > 0) {
                groupedRefused = true;
            }
        }
        Device.super.gemmGrouped(x, rowStart, rows, k, w, n, y, precision);
    }

    /**
     * Groups laid out at a uniform stride (rowStart[g] = rowStart[0] + g · capacity, rows[g] &lt;= capacity) run as one
     * cuBLAS batched GEMM per input part over capacity rows each (rows past a group's count are padding whose
     * outputs nobody reads). Returns a cuBLAS status, or -1 when the layout is not uniform.
     */
    private int grouped(Buf x, int[] rowStart, int[] rows, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        int groups = w.length;
        int capacity = groups == 1 ? rows[0] : rowStart[1] - rowStart[0];
        for (int g = 0; g < groups; g++) {
            if (rowStart[g] != rowStart[0] + g * capacity || rows[g] > capacity) {
                return -1;
            }
        }
        int parts = Math.max(1, precision.inputParts());
        DevicePointer[] in = split(
                x.slice((long) rowStart[0] * k, (long) groups * capacity * k), (long) groups * capacity * k, parts);
        // Pointer arrays on the device: per part, A (weights), B (that part's rows), C (output rows).
        long[] ptrs = new long[3 * groups * parts];
        for (int p = 0; p < parts; p++) {
            for (int g = 0; g < groups; g++) {
                ptrs[(3 * p) * groups + g] = ptr(w[g]).address();
                ptrs[(3 * p + 1) * groups + g] = in[p].address() + (long) g * capacity * k * 2;
                ptrs[(3 * p + 2) * groups + g] = ptr(y).address() + ((long) rowStart[0] + (long) g * capacity) * n * 4;
            }
        }
        if (ptrDevElems < ptrs.length) {
            scratchGrows("the batched GEMM pointers");
            if (ptrDev != null) {
                Cuda.check(cudaFree(ptrDev), "cudaFree");
            }
            ptrDevElems = Math.max(ptrs.length, 2 * ptrDevElems);
            ptrDev = new Pointer();
            Cuda.check(cudaMalloc(ptrDev, ptrDevElems * 8), "cudaMalloc(batched GEMM pointers)");
        }
        stageL = grow(stageL, ptrs.length, LongPointer::new);
        stageL.put(ptrs, 0, ptrs.length);
        Cuda.check(
                cudaMemcpy(ptrDev, stageL, ptrs.length * 8L, cudaMemcpyHostToDevice),
                "cudaMemcpy batched GEMM pointers");
        for (int p = 0; p < parts; p++) {
            long base = ptrDev.address() + 3L * p * groups * 8;
            // The arrays go in as PointerPointer views of device memory: JavaCPP's plain-Pointer overload of a void**
            // parameter passes the address of a host copy of the pointer (by pointer-to-pointer), not the array.
            int status = cublasGemmBatchedEx(
                    cublas,
                    CUBLAS_OP_T,
                    CUBLAS_OP_N,
                    n,
                    capacity,
                    k,
                    one,
                    deviceArray(base),
                    CUDA_R_16BF,
                    k,
                    deviceArray(base + groups * 8L),
                    CUDA_R_16BF,
                    k,
                    p == 0 ? zero : one,
                    deviceArray(base + 2L * groups * 8),
                    CUDA_R_32F,
                    n,
                    groups,
                    CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT);
            if (status != 0) {
                return status;
            }
        }
        return 0;
    }

    @Override
    public boolean batchesGroups() {
        return BATCHED_EXPERTS;
    }

    @Override
    public void moeCombine(Buf ye, Buf slot, Buf weights, int tokens, int topK, int width, Buf addend, Buf y) {
        bind();
        Object add = addend == null ? new DevicePointer(0) : addend;
        kernels.launch("moe_combine", tokens, 1, BLOCK, 0, ye, slot, weights, topK, width, add, y);
    }

    @Override
    public void moePermute(Buf experts, int t, int topK, int nExperts, Buf offsets, Buf slotOf, Buf slotRow) {
        if (nExperts > MAX_EXPERTS) {
            throw new IllegalArgumentException(
                    "the CUDA MoE permutation takes up to " + MAX_EXPERTS + " experts; the model has " + nExperts);
        }
        int pairs = t * topK;
        experts.need(Buf.Kind.I32, pairs, "moePermute experts");
        offsets.need(Buf.Kind.I32, nExperts + 1L, "moePermute offsets");
        slotOf.need(Buf.Kind.I32, pairs, "moePermute slotOf");
        slotRow.need(Buf.Kind.I32, pairs, "moePermute slotRow");
        bind();
        kernels.launch("moe_offsets", 1, 1, 1024, 0, experts, pairs, nExperts, offsets);
        kernels.launch("moe_slots", nExperts, 1, BLOCK, 0, experts, pairs, topK, offsets, slotOf, slotRow);
    }

    @Override
    public void gemmExperts(Buf x, Buf offsets, int slots, int k, Buf[] w, int n, Buf y, GemmPrecision precision) {
        y.need(Buf.Kind.F32, (long) slots * n, "gemmExperts y");
        expertGemm(x, offsets, slots, k, w, n, 0, y, precision);
    }

    @Override
    public void gemmExpertsSwiglu(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int inter, Buf out, GemmPrecision precision) {
        out.need(Buf.Kind.F32, (long) slots * inter, "gemmExpertsSwiglu out");
        expertGemm(x, offsets, slots, k, w, 2 * inter, inter, out, precision);
    }

    /**
     * The moe_gemm kernels over w's experts (moe_gemm_bf16 on the tensor cores when every expert multiplies BF16 parts):
     * the row tiles of each expert from the device's offsets (moe_tile_starts), then a grid of (an upper bound on the
     * row tiles: one partial tile per expert at most) × column tiles.
     */
    private void expertGemm(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int n, int swigluInter, Buf y, GemmPrecision precision) {
        if (slots == 0) {
            return;
        }
        x.need(Buf.Kind.F32, (long) slots * k, "gemmExperts x");
        offsets.need(Buf.Kind.I32, w.length + 1L, "gemmExperts offsets");
        bind();
        if (!MOE_GEMM) {
            perExpert(x, offsets, slots, k, w, n, swigluInter, y, precision);
            return;
        }
        ExpertTable table = expertTable(w, n, k, precision);
        if (tileStart == null || tileStart.length() < w.length + 1L) {
            if (tileStart != null) {
                free(tileStart);
            }
            tileStart = alloc(Buf.Kind.I32, w.length + 1L);
        }
        kernels.launch("moe_tile_starts", 1, 1, 32, 0, offsets, w.length, tileStart);
        int rowTiles = (slots + MG_TM - 1) / MG_TM + Math.min(w.length, slots);
        int colTiles = swigluInter > 0 ? (swigluInter + MG_TN / 2 - 1) / (MG_TN / 2) : (n + MG_TN - 1) / MG_TN;
        kernels.launch(
                table.tensorCores() ? "moe_gemm_bf16" : "moe_gemm",
                rowTiles,
                colTiles,
                256,
                0,
                x,
                offsets,
                tileStart,
                w.length,
                table.experts(),
                table.meta(),
                k,
                n,
                swigluInter,
                y);
    }

    /**
     * The default (without -Dscorch.cuda.moe-gemm=true): the offsets read back (a host round trip per projection), then
     * one cuBLAS GEMM per expert with rows; SwiGLU after each expert's gate_up GEMM, through a scratch.
     */
    private void perExpert(
            Buf x, Buf offsets, int slots, int k, Buf[] w, int n, int swigluInter, Buf y, GemmPrecision precision) {
        if (capturing) {
            throw new IllegalStateException("the per-expert GEMMs read the group bounds back: a CUDA graph of an MoE"
                    + " layer needs -D" + KernelSelection.CUDA_MOE_GEMM + "=true");
        }
        int[] o = new int[w.length + 1];
        read(offsets, o, 0, o.length);
        for (int e = 0; e < w.length; e++) {
            int rows = o[e + 1] - o[e];
            if (rows <= 0) {
                continue;
            }
            if (o[e] < 0 || o[e + 1] > slots) {
                throw new IllegalStateException("gemmExperts: expert " + e + " has rows [" + o[e] + ", " + o[e + 1]
                        + ") of " + slots + " slots");
            }
            Buf xe = x.slice((long) o[e] * k, (long) rows * k);
            if (swigluInter == 0) {
                gemm(xe, rows, k, w[e], n, y.slice((long) o[e] * n, (long) rows * n), precision);
                continue;
            }
            if (guScratch == null || guScratch.length() < (long) rows * n) {
                if (guScratch != null) {
                    free(guScratch);
                }
                guScratch = alloc(Buf.Kind.F32, (long) rows * n);
            }
            gemm(xe, rows, k, w[e], n, guScratch, precision);
            swiglu(guScratch, rows, swigluInter, y.slice((long) o[e] * swigluInter, (long) rows * swigluInter));
        }
    }

    /**
     * A layer's experts for moe_gemm: each one's ExpertWeight (4 words) and the shape facts they share; tensorCores when
     * every expert multiplies BF16 parts (moe_gemm_bf16), not fp32 weights.
     */
    private record ExpertTable(Buf experts, Buf meta, boolean tensorCores) {}

    /**
     * w's table, built on first use in this precision (the plan of each expert's products depends on it) and kept while
     * the device lives: experts are loaded once and never change.
     */
    private ExpertTable expertTable(Buf[] w, int n, int k, GemmPrecision precision) {
        return expertTables
                .computeIfAbsent(w, a -> new java.util.EnumMap<>(GemmPrecision.class))
                .computeIfAbsent(precision, p -> {
                    long[] words = new long[4 * w.length];
                    int[] meta = new int[6];
                    boolean tensorCores = true;
                    meta[0] = expertKind(w[0]);
                    for (int e = 0; e < w.length; e++) {
                        Buf b = w[e];
                        if (expertKind(b) != meta[0]) {
                            throw new IllegalArgumentException(
                                    "gemmExperts: expert " + e + " is " + b.kind() + ", expert 0 " + w[0].kind());
                        }
                        DequantPlan plan;
                        long flags = 0;
                        if (b.storage() instanceof PackedInt4 q) {
                            q.check(n, k);
                            int[] shape = {q.wordsPerRow(), q.groupsPerRow(), q.groupSize()};
                            if (e > 0 && (meta[1] != shape[0] || meta[2] != shape[1] || meta[3] != shape[2])) {
                                throw new IllegalArgumentException("gemmExperts: INT4 experts in different groups");
                            }
                            System.arraycopy(shape, 0, meta, 1, 3);
                            words[4 * e] = ptr(q.packed()).address();
                            words[4 * e + 1] = ptr(q.scales()).address();
                            flags = q.scales().kind() == Buf.Kind.BF16 ? 1 : 0;
                            plan = q.plan(p);
                        } else if (b.storage() instanceof PackedFp8 q) {
                            q.check(n, k);
                            if (e > 0 && (meta[4] != q.scaleCols() || meta[5] != q.blockCols())) {
                                throw new IllegalArgumentException("gemmExperts: FP8 experts in different blocks");
                            }
                            meta[4] = q.scaleCols();
                            meta[5] = q.blockCols();
                            words[4 * e] = ptr(q.codes()).address();
                            words[4 * e + 1] = ptr(q.scales()).address();
                            words[4 * e + 2] = ptr(q.scaleRows()).address();
                            plan = q.plan(p);
                        } else {
                            b.need(b.kind(), (long) n * k, "gemmExperts w[" + e + "]");
                            words[4 * e] = ptr(b).address();
                            plan = b.kind() == Buf.Kind.BF16
                                    ? new DequantPlan(false, 1, Math.max(1, p.inputParts()))
                                    : DequantPlan.FP32;
                        }
                        words[4 * e + 3] = flags | (long) plan.weightParts() << 4 | (long) plan.inputParts() << 8;
                        tensorCores &= !plan.fp32();
                    }
                    int[] asInts = new int[2 * words.length]; // little-endian halves, as the kernel's struct reads them
                    for (int i = 0; i < words.length; i++) {
                        asInts[2 * i] = (int) words[i];
                        asInts[2 * i + 1] = (int) (words[i] >>> 32);
                    }
                    return new ExpertTable(upload(asInts), upload(meta), tensorCores);
                });
    }

    private static int expertKind(Buf b) {
        return switch (b.kind()) {
            case F32 -> 0;
            case BF16 -> 1;
            case INT4 -> 2;
            case FP8 -> 3;
            default ->
                throw new IllegalArgumentException("gemmExperts takes F32, BF16, INT4 or FP8 weights, not " + b.kind());
        };
    }

    /**
     * Row-major y[m, n] (row stride ldy) = x[m, k] · w[n, k]ᵀ, plus y where beta is one: w and x both BF16 (fp32
     * compute) or both fp32 (pedantic fp32 compute), y fp32. what names the call in an error, with its m x k x n.
     */
    private void gemmEx(
            int m,
            int k,
            Pointer w,
            Pointer x,
            boolean bf16,
            int n,
            Pointer y,
            int ldy,
            FloatPointer beta,
            String what) {
        int type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
        Cuda.checkBlas(
                cublasGemmEx(
                        cublas,
                        CUBLAS_OP_T,
                        CUBLAS_OP_N,
                        n,
                        m,
                        k,
                        one,
                        w,
                        type,
                        k,
                        x,
                        type,
                        k,
                        beta,
                        y,
                        CUDA_R_32F,
                        ldy,
                        bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC,
                        CUBLAS_GEMM_DEFAULT),
                what + " " + m + "x" + k + "x" + n);
    }

    private static int grid(long n) {
        return (int) Math.max(1, Math.min((n + BLOCK - 1) / BLOCK, 132L * 16));
    }

    @Override
    public void rmsNorm(Buf x, int rows, int stride, int offset, int dim, Buf weight, double eps, Buf out) {
        out.need(Buf.Kind.F32, (long) rows * dim, "rmsNorm out");
        bind();
        kernels.launch("rms_norm", rows, 1, BLOCK, 0, x, stride, offset, dim, weight, (float) eps, out);
    }

    @Override
    public void rope(Buf x, int rows, int heads, int rowStride, int headStride, int offset, int ropeDim, Rotary r) {
        bind();
        kernels.launch(
                "rope", rows, 1, 128, 0, x, heads, rowStride, headStride, offset, ropeDim, r.positions(), r.cosSin());
    }

    /** x's rows [q_a | latent | k_pe]: stride q_out + kv_lora_rank + qk_rope, the latent at q_out. */
    @Override
    public void rmsNormRope(Buf x, int rows, Buf weight, double eps, MlaShape s, Rotary r, Buf latent, Buf kPe) {
        latent.need(Buf.Kind.F32, (long) rows * s.kvLoraRank(), "rmsNormRope latent");
        kPe.need(Buf.Kind.F32, (long) rows * s.qkRope(), "rmsNormRope kPe");
        bind();
        kernels.launch(
                "rms_norm_rope",
                rows,
                1,
                BLOCK,
                0,
                x,
                s.qOut() + s.kvAWidth(),
                s.qOut(),
                s.kvLoraRank(),
                weight,
                (float) eps,
                s.qkRope(),
                r.positions(),
                r.cosSin(),
                latent,
                kPe);
    }

    @Override
    public void copyCols(Buf src, int rows, int srcStride, int srcOff, int width, Buf dst, int dstStride, int dstOff) {
        bind();
        kernels.launch("copy_cols", rows, 1, BLOCK, 0, src, srcStride, srcOff, width, dst, dstStride, dstOff);
    }

    @Override
    public void add(Buf x, Buf y, long n) {
        bind();
        kernels.launch("add_inplace", grid(n), 1, BLOCK, 0, x, y, n);
    }

    @Override
    public void swiglu(Buf gu, int rows, int inter, Buf out) {
        bind();
        kernels.launch("swiglu", rows, 1, BLOCK, 0, gu, inter, out);
    }

    @Override
    public void gatherRows(Buf x, Buf rows, int n, int width, Buf out) {
        bind();
        kernels.launch(
                x.kind() == Buf.Kind.BF16 ? "gather_rows_bf16" : "gather_rows", n, 1, BLOCK, 0, x, rows, width, out);
    }

    @Override
    public void mlaAttention(Buf q, Buf kv, Buf kPe, KeyTiles keys, MlaShape s, Buf out) {
        bind();
        if (s.qHead() > ATTN_MAX_QK || s.vHead() > ATTN_MAX_V) {
            throw new IllegalArgumentException("the CUDA attention kernel takes q_head_dim up to " + ATTN_MAX_QK
                    + " and v_head_dim up to " + ATTN_MAX_V + ", the model has " + s.qHead() + " and " + s.vHead());
        }
        kernels.launch(
                "mla_attention",
                keys.numTiles(),
                s.heads(),
                ATTN_THREADS,
                0,
                q,
                kv,
                kPe,
                keys.keyStart(),
                keys.keyLen(),
                keys.tiles(),
                s.heads(),
                s.qkNope(),
                s.qkRope(),
                s.vHead(),
                s.scale(),
                out);
    }

    @Override
    public void mlaDecode(Buf q, int rows, Buf cache, int past, Buf kvBProj, MlaShape s, Buf out) {
        int shared = decodeShared(kvBProj, s);
        q.need(Buf.Kind.F32, (long) rows * s.heads() * s.qHead(), "mlaDecode q");
        cache.need(Buf.Kind.F32, (long) (past + rows) * s.kvAWidth(), "mlaDecode cache");
        kvBProj.need(kvBProj.kind(), (long) s.heads() * s.kvHead() * s.kvLoraRank(), "mlaDecode kv_b_proj");
        out.need(Buf.Kind.F32, (long) rows * s.heads() * s.vHead(), "mlaDecode out");
        bind();
        kernels.launch(
                kvBProj.kind() == Buf.Kind.BF16 ? "mla_decode_bf16" : "mla_decode_f32",
                rows,
                s.heads(),
                DEC_THREADS,
                shared,
                q,
                cache,
                past,
                kvBProj,
                s.heads(),
                s.qkNope(),
                s.qkRope(),
                s.vHead(),
                s.kvLoraRank(),
                s.scale(),
                out);
    }

    @Override
    public void cacheAppend(Buf latent, Buf kPe, int rows, MlaShape s, Buf caches, Buf lengths) {
        latent.need(Buf.Kind.F32, (long) rows * s.kvLoraRank(), "cacheAppend latent");
        kPe.need(Buf.Kind.F32, (long) rows * s.qkRope(), "cacheAppend kPe");
        caches.need(Buf.Kind.ADDR, rows, "cacheAppend caches");
        lengths.need(Buf.Kind.I32, rows, "cacheAppend lengths");
        bind();
        kernels.launch("cache_append", rows, 1, BLOCK, 0, latent, kPe, s.kvLoraRank(), s.qkRope(), caches, lengths);
    }

    @Override
    public void mlaDecodeRows(Buf q, int rows, Buf caches, Buf lengths, Buf kvBProj, MlaShape s, Buf out) {
        int shared = decodeShared(kvBProj, s);
        q.need(Buf.Kind.F32, (long) rows * s.heads() * s.qHead(), "mlaDecodeRows q");
        caches.need(Buf.Kind.ADDR, rows, "mlaDecodeRows caches");
        lengths.need(Buf.Kind.I32, rows, "mlaDecodeRows lengths");
        kvBProj.need(kvBProj.kind(), (long) s.heads() * s.kvHead() * s.kvLoraRank(), "mlaDecodeRows kv_b_proj");
        out.need(Buf.Kind.F32, (long) rows * s.heads() * s.vHead(), "mlaDecodeRows out");
        bind();
        kernels.launch(
                kvBProj.kind() == Buf.Kind.BF16 ? "mla_decode_rows_bf16" : "mla_decode_rows_f32",
                rows,
                s.heads(),
                DEC_THREADS,
                shared,
                q,
                caches,
                lengths,
                kvBProj,
                s.heads(),
                s.qkNope(),
                s.qkRope(),
                s.vHead(),
                s.kvLoraRank(),
                s.scale(),
                out);
    }

    /** The absorbed attention kernels' dynamic shared memory, checked, and their kv_b_proj's kind. */
    private static int decodeShared(Buf kvBProj, MlaShape s) {
        int kvLoraRank = s.kvLoraRank();
        long shared = ((long) (DEC_WARPS + 1) * kvLoraRank + s.qkRope()) * Float.BYTES;
        if (shared > DEC_MAX_SHARED) {
            throw new IllegalArgumentException("the CUDA absorbed attention kernel takes up to " + DEC_MAX_SHARED
                    + " bytes of shared memory; kv_lora_rank " + kvLoraRank + " needs " + shared);
        }
        if (kvBProj.kind() != Buf.Kind.F32 && kvBProj.kind() != Buf.Kind.BF16) {
            throw new IllegalArgumentException("mlaDecode takes kv_b_proj in F32 or BF16, not " + kvBProj.kind());
        }
        return (int) shared;
    }

    @Override
    public void moeRoute(Buf logits, Buf bias, int t, MoeShape r, Buf experts, Buf weights) {
        if (r.nRoutedExperts() > 512 || r.nGroup() > 64) {
            throw new IllegalArgumentException(
                    "the CUDA router takes up to 512 experts in up to 64 groups; the model has " + r.nRoutedExperts()
                            + " in " + r.nGroup());
        }
        bind();
        kernels.launch(
                "moe_route",
                (t + 127) / 128,
                1,
                128,
                0,
                logits,
                bias,
                t,
                r.nRoutedExperts(),
                r.numExpertsPerTok(),
                r.nGroup(),
                r.topkGroup(),
                r.normTopkProb() ? 1 : 0,
                r.routedScalingFactor(),
                experts,
                weights);
    }

    @Override
    public void logSoftmaxStats(Buf logits, int rows, int vocab, Buf targets, Buf stats) {
        bind();
        kernels.launch("log_softmax_stats", rows, 1, BLOCK, 0, logits, vocab, targets, stats);
    }

    @Override
    public void synchronize() {
        host("synchronize");
        Cuda.check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }

    @Override
    public void close() {
        bind();
        for (java.util.Map<GemmPrecision, ExpertTable> m : expertTables.values()) {
            for (ExpertTable t : m.values()) {
                free(t.experts());
                free(t.meta());
            }
        }
        if (tileStart != null) {
            free(tileStart);
        }
        if (guScratch != null) {
            free(guScratch);
        }
        cublasDestroy_v2(cublas);
        if (cublasWorkspace != null) {
            cudaFree(cublasWorkspace);
        }
        if (bf16Scratch != null) {
            cudaFree(bf16Scratch);
        }
        if (ptrDev != null) {
            cudaFree(ptrDev);
        }
        if (dequantScratch != null) {
            cudaFree(dequantScratch);
        }
        kernels.close();
        if (stream != null) {
            cudaStreamDestroy(stream);
        }
        one.close();
        zero.close();
        stageF.close();
        stageI.close();
        stageS.close();
        stageL.close();
    }

    static DevicePointer ptr(Buf b) {
        if (!(b.storage() instanceof DevicePointer base)) {
            throw new IllegalArgumentException("not a buffer of a CUDA device");
        }
        return b.offset() == 0
                ? base
                : new DevicePointer(base.address() + b.offset() * b.kind().bytes());
    }
}
