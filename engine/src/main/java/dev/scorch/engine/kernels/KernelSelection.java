package dev.scorch.engine.kernels;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import jdk.incubator.vector.FloatVector;

/**
 * Which kernels this JVM runs, and why: the one place that picks them. {@link #choose} is a pure function of the JVM's
 * {@link Inputs} (the Vector API's preferred width, the JDK, the scorch.* properties, and whether the native library
 * loaded, with the CPU features it reports); {@link #current} is its answer for this JVM, made once. The kernels read
 * their switches from it (PackedGemm its tile, NativeAttention and NativeVecMath whether they run, RowDecoder which
 * in-register decoders exist, CpuOps the Vector API or the scalar code and its default precision, CudaDevice its expert
 * GEMMs); bench, inspect
 * and the executors' log print it.
 *
 * <p>A native kernel gives the bits of the Java kernel it stands in for; the vector width and the scalar fallback do
 * change rounding (a fixed rounding per machine and JVM, whatever the batch).
 *
 * @param inputs what the choice was made from
 * @param nativeLibrary the native library: loaded and with which CPU features, or why not
 * @param prefillGemm CpuOps.matmul, prefill's and scoring's GEMMs: PackedGemm, or ScalarGemm without the Vector API
 * @param gemmNr weight rows per PackedGemm micro-kernel call: the native tile's, else the Java tile's (4 or 6)
 * @param decodeGemm CpuOps.matmulDecode, decode steps' GEMMs: RowDotGemm, or ScalarGemm
 * @param decodeBlock4x4 RowDotGemm runs BF16 weights four weight rows × four rows of x, its lanes folded in registers
 *     (16 lanes on JDK 21+; elsewhere two 2 × 4 blocks)
 * @param bf16Decoder how PackedGemm decodes a K block of BF16 weight rows to fp32 (also fp8Decoder, int4Decoder)
 * @param attention CpuOps.attention, prefill's causal attention of each head
 * @param vectorMath CpuOps.logSumExp and siluMul
 * @param cudaExperts CudaDevice's routed-expert GEMMs (cudaBatchedExperts: Device.gemmGrouped's batched path)
 * @param cpuPrecision how PackedGemm multiplies (fp32, or bf16 parts on AVX512-BF16): CpuOps' default
 * @param precision the same as a choice: where it runs, and why (with the matrix units found)
 * @param decodePrecision how decode's row-dot multiplies BF16 weights in that precision: bf16 parts on VDPBF16PS where
 *     the native row-dot runs on 16 lanes and the CPU has AVX512-BF16, else fp32, and why
 */
public record KernelSelection(
        Inputs inputs,
        String nativeLibrary,
        Choice prefillGemm,
        int gemmNr,
        Choice decodeGemm,
        boolean decodeBlock4x4,
        Choice bf16Decoder,
        Choice fp8Decoder,
        Choice int4Decoder,
        Choice attention,
        Choice vectorMath,
        Choice cudaExperts,
        boolean cudaBatchedExperts,
        CpuPrecision cpuPrecision,
        Choice precision,
        Choice decodePrecision) {

    /** -Dscorch.native=false: no native code at all. */
    public static final String NATIVE = "scorch.native";
    /** -Dscorch.native.attention=false: Java attention beside the other native kernels. */
    public static final String NATIVE_ATTENTION = "scorch.native.attention";
    /** -Dscorch.native.vecmath=false: Java log-sum-exp and silu · u beside the other native kernels. */
    public static final String NATIVE_VECMATH = "scorch.native.vecmath";
    /**
     * -Dscorch.cuda.batched-experts=true: routed experts as cuBLAS batched GEMMs. Off by default: that path has not yet
     * passed the device check (its first try faulted on a pointer-array argument, since fixed but not re-run), while one
     * GEMM per expert has.
     */
    public static final String CUDA_BATCHED_EXPERTS = "scorch.cuda.batched-experts";
    /**
     * -Dscorch.cuda.moe-gemm=true: routed experts through the moe_gemm kernel over all experts, group bounds on the
     * device, instead of one cuBLAS GEMM per expert after reading the expert offsets back. Off by default until it passes
     * the device check (bin/gpu-check turns it on); the cuBLAS path has passed it.
     */
    public static final String CUDA_MOE_GEMM = "scorch.cuda.moe-gemm";

    /** -Dscorch.native.rowdot=false: decode's Java row-dot beside the other native kernels. */
    public static final String NATIVE_ROWDOT = "scorch.native.rowdot";

    /** -Dscorch.native.bf16=false: the CPU's AVX512-BF16 taken as absent (fp32 whatever the precision asked). */
    public static final String NATIVE_BF16 = "scorch.native.bf16";

    private static final String[] PROPERTIES = {
        NATIVE,
        NATIVE_ATTENTION,
        NATIVE_VECMATH,
        NATIVE_ROWDOT,
        NATIVE_BF16,
        CUDA_BATCHED_EXPERTS,
        CUDA_MOE_GEMM,
        CpuPrecision.PROPERTY
    };

    /** Whether the value of -Dscorch.cuda.moe-gemm turns moe_gemm on: true (in any case), as Boolean.getBoolean. */
    public static boolean moeGemm(String value) {
        return Boolean.parseBoolean(value);
    }

    /** Where a kernel runs. */
    public enum Impl {
        /** C through JNI (NativeCpu's library). */
        NATIVE,
        /** Java on the Vector API. */
        VECTOR,
        /** Plain Java loops. */
        SCALAR,
        /** On the GPU. */
        CUDA
    }

    /** One kernel: where it runs, what it is, and why it was picked over the others. */
    public record Choice(Impl impl, String kernel, String reason) {
        @Override
        public String toString() {
            return kernel + " (" + reason + ")";
        }
    }

    /**
     * What the choice depends on. jdk: the feature version; lanes: floats in the Vector API's preferred species (0 without
     * jdk.incubator.vector); os and arch: os.name and os.arch; properties: the scorch.* ones that are set.
     */
    public record Inputs(int jdk, int lanes, String os, String arch, Map<String, String> properties, Library library) {
        public Inputs {
            properties = Collections.unmodifiableSortedMap(new TreeMap<>(properties));
        }

        String property(String name) {
            return properties.get(name);
        }

        /** This JVM's: reads the properties and asks NativeCpu, which loads the library (once per JVM) unless it may not. */
        static Inputs ofThisJvm() {
            Map<String, String> set = new TreeMap<>();
            for (String p : PROPERTIES) {
                String v = System.getProperty(p);
                if (v != null) {
                    set.put(p, v);
                }
            }
            return new Inputs(
                    Runtime.version().feature(),
                    preferredLanes(),
                    System.getProperty("os.name", ""),
                    System.getProperty("os.arch", ""),
                    set,
                    NativeCpu.library());
        }

        private static int preferredLanes() {
            try {
                return FloatVector.SPECIES_PREFERRED.length();
            } catch (Throwable t) { // jdk.incubator.vector not in the JVM's modules
                return 0;
            }
        }
    }

    /**
     * How loading the native library went: whyNotLoaded null when System.load took it, and then isa, what the CPU has (2:
     * AVX-512 F, AVX2 and FMA; 1: AVX2 and FMA; 0: neither).
     */
    public record Library(String whyNotLoaded, int isa, int units) {
        /** A bit of units: the CPU (and the OS) run AVX512-BF16, and the library has its kernel. */
        public static final int AVX512_BF16 = 1;
        /** AMX-BF16 and AMX-TILE: found and reported; no kernel uses them yet. */
        public static final int AMX_BF16 = 2;

        public static final int AMX_TILE = 4;

        public static Library loaded(int isa) {
            return new Library(null, isa, 0);
        }

        /** Loaded, with the matrix units found (bits AVX512_BF16, AMX_BF16, AMX_TILE). */
        public static Library loaded(int isa, int units) {
            return new Library(null, isa, units);
        }

        public static Library notLoaded(String why) {
            return new Library(why, 0, 0);
        }

        /** The units found, in words. */
        String unitsFound() {
            return "AVX512-BF16 " + ((units & AVX512_BF16) != 0 ? "yes" : "no") + ", AMX-BF16 "
                    + ((units & AMX_BF16) != 0 ? "yes" : "no");
        }

        /** Null where its kernels run on this CPU; else why not. */
        String whyNotUsable() {
            return whyNotLoaded != null ? whyNotLoaded : isa < 1 ? "this CPU lacks AVX2 or FMA" : null;
        }
    }

    private static final class Current {
        static final KernelSelection SELECTION = choose(Inputs.ofThisJvm());
    }

    /** This JVM's selection (the first call loads the native library where it may). */
    public static KernelSelection current() {
        return Current.SELECTION;
    }

    /**
     * The selection these inputs give with -Dscorch.cpu.precision=asked instead (for bench's --cpu-precision, in a JVM
     * whose own selection is made): the same kernels, and the precision that runs of the one asked, and why.
     */
    public KernelSelection withPrecision(String asked) {
        Map<String, String> p = new TreeMap<>(inputs.properties());
        p.put(CpuPrecision.PROPERTY, asked);
        return choose(new Inputs(inputs.jdk(), inputs.lanes(), inputs.os(), inputs.arch(), p, inputs.library()));
    }

    /** Whether CpuOps runs the Vector API (and native) kernels rather than the scalar ones. */
    public boolean simd() {
        return prefillGemm.impl() != Impl.SCALAR;
    }

    /**
     * Why NativeCpu must not even try to load the library (before it is loaded, so a pure function of the property and
     * the platform), or null.
     */
    static String libraryRefusal(String nativeProperty, String os, String arch) {
        if ("false".equals(nativeProperty)) {
            return "-D" + NATIVE + "=false";
        }
        if (!os.startsWith("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            return "library not built for " + os + " " + arch;
        }
        return null;
    }

    /** The kernels for in: the same answer for the same inputs, on any machine. */
    public static KernelSelection choose(Inputs in) {
        int lanes = in.lanes();
        int jdk = in.jdk();
        // The Vector API kernels take at least 4 lanes; below that every CpuOps kernel is a plain loop.
        boolean simd = lanes >= 4;
        String noVectors = lanes == 0
                ? "no Vector API in this JVM (--add-modules jdk.incubator.vector)"
                : "the JVM's vectors hold " + lanes + " floats, under 4";
        String libraryOff = libraryRefusal(in.property(NATIVE), in.os(), in.arch());
        if (libraryOff == null) {
            libraryOff = in.library().whyNotUsable();
        }
        boolean library = libraryOff == null;
        boolean avx512 = library && in.library().isa() == 2;
        String nativeLibrary = !library
                ? libraryOff
                : avx512 ? "loaded; CPU has AVX-512, AVX2 and FMA" : "loaded; CPU has AVX2 and FMA";
        String vectorKernel = "Java Vector API, " + lanes + " lanes";
        // Why a kernel that needs the AVX-512 code does not get it.
        String noAvx512 = !library ? libraryOff : "CPU lacks AVX-512";

        // Prefill: PackedGemm's tile of MR = 2 vectors of rows. The library has tiles of 16 rows (AVX2, 2 x 6) and 32
        // rows
        // (AVX-512, 2 x 12: NativeCpu.nr); the Java tile is 2 x 6, or 2 x 4 (8 accumulators, still enough independent
        // FMA
        // chains for two FMA pipes of latency 4) before JDK 21, whose C2 spills the 2 x 6 one: half the speed.
        int mr = 2 * lanes;
        boolean nativeGemm = library && (mr == 16 || mr == 32 && avx512);
        int javaNr = jdk >= 21 ? 6 : 4;
        int gemmNr = nativeGemm ? (mr == 32 ? 12 : 6) : javaNr;
        String whyJavaGemm = !library
                ? libraryOff
                : mr == 32
                        ? "CPU lacks AVX-512 for the 32-row tile"
                        : "no native tile for the JVM's " + lanes + "-float vectors";
        Choice prefill;
        if (!simd) {
            prefill = new Choice(Impl.SCALAR, "scalar FMA chains", noVectors);
        } else if (nativeGemm) {
            prefill = new Choice(
                    Impl.NATIVE,
                    "native C 2 x " + gemmNr + " on " + mr + "-row tiles (" + (mr == 32 ? "AVX-512" : "AVX2") + ")",
                    mr == 32
                            ? "CPU has AVX-512"
                            : avx512
                                    ? "CPU has AVX-512, but the JVM's vectors hold 8 floats"
                                    : "CPU has AVX2 and FMA, not AVX-512");
        } else {
            prefill = new Choice(
                    Impl.VECTOR,
                    "Java Vector API 2 x " + javaNr + ", " + lanes + " lanes",
                    whyJavaGemm + "; JDK " + jdk + (jdk >= 21 ? ": the 2 x 6 tile" : ": C2 spills the 2 x 6 tile"));
        }

        // Sixteen accumulators need AVX-512's 32 registers; on JDK 17 C2 boxes the vectors of their lane folds.
        boolean block4x4 = simd && lanes == 16 && jdk >= 21;
        String rowBlocks = lanes != 16
                ? ""
                : block4x4
                        ? "; BF16 rows 4 x 4, lanes folded in registers"
                        : "; BF16 rows 2 x 4 (JDK " + jdk + ": C2 boxes the 4 x 4 block's lane folds)";
        // The native row-dot and absorbed attention have the lanes of the Java ones: 8 (AVX2) or 16 (AVX-512); F32 and
        // F16 weights, and rows a mapping border cuts, run in Java.
        String whyJavaRowDot = !library
                ? libraryOff
                : lanes != 8 && !(lanes == 16 && avx512)
                        ? "no native row-dot for the JVM's " + lanes + "-float vectors"
                                + (lanes == 16 ? " without AVX-512" : "")
                        : "false".equals(in.property(NATIVE_ROWDOT)) ? "-D" + NATIVE_ROWDOT + "=false" : null;
        Choice decode;
        if (!simd) {
            decode = new Choice(Impl.SCALAR, "scalar FMA chains", noVectors);
        } else if (whyJavaRowDot == null) {
            decode = new Choice(
                    Impl.NATIVE,
                    "native C row-dot, " + lanes + " fp32 lanes (" + (lanes == 16 ? "AVX-512" : "AVX2")
                            + "), BF16, FP8 and INT4 read in place; absorbed attention on BF16 kv_b_proj in place",
                    "one pass over the weights, straight from the mapping, no row copies");
        } else {
            decode = new Choice(
                    Impl.VECTOR,
                    "Java Vector API row-dot, " + lanes + " fp32 lanes (" + 32 * lanes + "-bit)",
                    "one pass over the weights, straight from the mapping; no native row-dot: " + whyJavaRowDot
                            + rowBlocks);
        }

        // The in-register decoders: BF16 widens L halves (4 lanes at least); FP8 and INT4 take L bytes or L / 8 words
        // (8).
        Choice bf16 = decoder(simd, noVectors, nativeGemm, whyJavaGemm, lanes, 4, "native C");
        Choice fp8 = decoder(simd, noVectors, nativeGemm, whyJavaGemm, lanes, 8, "native C");
        Choice int4 = decoder(
                simd,
                noVectors,
                nativeGemm,
                whyJavaGemm,
                lanes,
                8,
                "native C, " + (avx512 ? "AVX-512" : "AVX2") + " build");

        // Attention and vector math: AVX-512 C code (16 lanes) where the library has it, unless turned off alone.
        Choice attention;
        if (!simd) {
            attention = new Choice(Impl.SCALAR, "scalar, one query row at a time", noVectors);
        } else if (avx512 && !"false".equals(in.property(NATIVE_ATTENTION))) {
            attention = new Choice(
                    Impl.NATIVE,
                    "native C, 16 lanes (AVX-512)",
                    "CPU has AVX-512; heads whose v_head is not a multiple of 16 run in Java");
        } else {
            attention = new Choice(Impl.VECTOR, vectorKernel, avx512 ? "-D" + NATIVE_ATTENTION + "=false" : noAvx512);
        }
        Choice vectorMath;
        if (!simd) {
            vectorMath = new Choice(Impl.SCALAR, "scalar", noVectors);
        } else if (avx512 && !"false".equals(in.property(NATIVE_VECMATH))) {
            vectorMath = new Choice(Impl.NATIVE, "native C, 16 lanes (AVX-512)", "CPU has AVX-512");
        } else {
            vectorMath = new Choice(Impl.VECTOR, vectorKernel, avx512 ? "-D" + NATIVE_VECMATH + "=false" : noAvx512);
        }

        boolean batched = Boolean.parseBoolean(in.property(CUDA_BATCHED_EXPERTS)); // as Boolean.getBoolean
        Choice cuda = moeGemm(in.property(CUDA_MOE_GEMM))
                ? new Choice(
                        Impl.CUDA,
                        "moe_gemm, one grouped kernel per projection over all experts",
                        "-D" + CUDA_MOE_GEMM + "=true")
                : new Choice(
                        Impl.CUDA,
                        "one cuBLAS GEMM per expert, offsets read back",
                        "the default until moe_gemm passes the device check");
        // Precision: bf16 parts need the AVX-512 tile (32 rows) and AVX512-BF16; fp32 is the default and the fallback.
        String asked = in.property(CpuPrecision.PROPERTY);
        CpuPrecision wanted;
        String unknown = null;
        try {
            wanted = asked == null ? CpuPrecision.FP32 : CpuPrecision.parse(asked);
        } catch (IllegalArgumentException e) {
            wanted = CpuPrecision.FP32;
            unknown = e.getMessage();
        }
        String units = library ? in.library().unitsFound() : "none (" + libraryOff + ")";
        String noBf16 = !simd
                ? noVectors
                : !nativeGemm || mr != 32
                        ? "the AVX-512 tile does not run: " + prefill.reason()
                        : (in.library().units() & Library.AVX512_BF16) == 0
                                ? "CPU lacks AVX512-BF16"
                                : "false".equals(in.property(NATIVE_BF16)) ? "-D" + NATIVE_BF16 + "=false" : null;
        CpuPrecision precisionMode;
        Choice precision;
        if (unknown != null) {
            precisionMode = CpuPrecision.FP32;
            precision = new Choice(prefill.impl(), "fp32", unknown + "; units: " + units);
        } else if (wanted == CpuPrecision.FP32) {
            precisionMode = CpuPrecision.FP32;
            precision = new Choice(
                    prefill.impl(),
                    "fp32",
                    (asked == null ? "the default" : "-D" + CpuPrecision.PROPERTY + "=fp32") + "; units: " + units);
        } else if (noBf16 != null) {
            precisionMode = CpuPrecision.FP32;
            precision = new Choice(prefill.impl(), "fp32", wanted.id() + " asked, but " + noBf16 + "; units: " + units);
        } else {
            precisionMode = wanted;
            precision = new Choice(
                    Impl.NATIVE,
                    wanted.id() + ": " + wanted.parts() + " bf16 part" + (wanted.parts() > 1 ? "s" : "")
                            + " a product on AVX512-BF16 (VDPBF16PS), 2 x 12 on 32-row tiles",
                    "-D" + CpuPrecision.PROPERTY + "=" + wanted.id() + "; units: " + units
                            + (((in.library().units() & Library.AMX_BF16) != 0) ? " (no AMX kernel yet)" : ""));
        }
        Choice decodePrecision;
        String noDecodeBf16 = decode.impl() != Impl.NATIVE
                ? "no native row-dot: " + decode.reason()
                : lanes != 16
                        ? "the native row-dot runs " + lanes + " lanes, not AVX-512's 16"
                        : (in.library().units() & Library.AVX512_BF16) == 0
                                ? "CPU lacks AVX512-BF16"
                                : "false".equals(in.property(NATIVE_BF16)) ? "-D" + NATIVE_BF16 + "=false" : null;
        if (precisionMode == CpuPrecision.FP32 || unknown != null) {
            decodePrecision = new Choice(decode.impl(), "fp32", precision.reason());
        } else if (noDecodeBf16 != null) {
            decodePrecision = new Choice(decode.impl(), "fp32", precisionMode.id() + " asked, but " + noDecodeBf16);
        } else {
            decodePrecision = new Choice(
                    Impl.NATIVE,
                    precisionMode.id() + ": BF16 weights read in place against " + precisionMode.parts() + " bf16 part"
                            + (precisionMode.parts() > 1 ? "s" : "") + " of x on VDPBF16PS; FP8, INT4 and F32 weights"
                            + " and the absorbed attention in fp32",
                    "-D" + CpuPrecision.PROPERTY + "=" + precisionMode.id());
        }
        return new KernelSelection(
                in,
                nativeLibrary,
                prefill,
                gemmNr,
                decode,
                block4x4,
                bf16,
                fp8,
                int4,
                attention,
                vectorMath,
                cuda,
                batched,
                precisionMode,
                precision,
                decodePrecision);
    }

    /** PackedGemm's decoder of one weight dtype whose Java vectors need minLanes. */
    private static Choice decoder(
            boolean simd,
            String noVectors,
            boolean nativeGemm,
            String whyJavaGemm,
            int lanes,
            int minLanes,
            String nativeKernel) {
        if (!simd) {
            return new Choice(Impl.SCALAR, "element by element (Linear.row)", noVectors);
        }
        if (nativeGemm) {
            return new Choice(Impl.NATIVE, nativeKernel, "beside the native GEMM tile");
        }
        if (lanes < minLanes) {
            return new Choice(
                    Impl.SCALAR,
                    "element by element (Linear.row)",
                    "the JVM's vectors hold " + lanes + " floats, under " + minLanes);
        }
        return new Choice(Impl.VECTOR, "Java Vector API, " + lanes + " lanes", whyJavaGemm);
    }

    /** The kernels by name, in the order of {@link #toJson}. */
    private Map<String, Choice> choices() {
        Map<String, Choice> m = new java.util.LinkedHashMap<>();
        m.put("prefill_gemm", prefillGemm);
        m.put("cpu_precision", precision);
        m.put("decode_gemm", decodeGemm);
        m.put("decode_precision", decodePrecision);
        m.put("bf16_decoder", bf16Decoder);
        m.put("fp8_decoder", fp8Decoder);
        m.put("int4_decoder", int4Decoder);
        m.put("attention", attention);
        m.put("vector_math", vectorMath);
        m.put("cuda_experts", cudaExperts);
        return m;
    }

    /** One line for logs: every kernel and why, then the inputs. */
    public String describe() {
        StringBuilder b = new StringBuilder();
        choices().forEach((name, c) -> b.append(name).append(": ").append(c).append("; "));
        return b.append("native library: ")
                .append(nativeLibrary)
                .append("; JDK ")
                .append(inputs.jdk())
                .append(", ")
                .append(inputs.lanes())
                .append(" float lanes, ")
                .append(inputs.os())
                .append(' ')
                .append(inputs.arch())
                .append(inputs.properties().isEmpty() ? "" : ", " + inputs.properties())
                .toString();
    }

    /**
     * {"prefill_gemm": {"impl", "kernel", "reason"}, "cpu_precision", "decode_gemm", "decode_precision",
     * "bf16_decoder", "fp8_decoder", "int4_decoder", "attention", "vector_math", "cuda_experts", "gemm_nr",
     * "native_library", "inputs": {"jdk", "vector_lanes", "os", "arch", "properties"}}.
     */
    public ObjectNode toJson() {
        ObjectNode o = new ObjectMapper().createObjectNode();
        choices().forEach((name, c) -> {
            ObjectNode k = o.putObject(name);
            k.put("impl", c.impl().name().toLowerCase(java.util.Locale.ROOT));
            k.put("kernel", c.kernel());
            k.put("reason", c.reason());
        });
        o.put("gemm_nr", gemmNr);
        o.put("native_library", nativeLibrary);
        ObjectNode i = o.putObject("inputs");
        i.put("jdk", inputs.jdk());
        i.put("vector_lanes", inputs.lanes());
        i.put("os", inputs.os());
        i.put("arch", inputs.arch());
        ObjectNode p = i.putObject("properties");
        inputs.properties().forEach(p::put);
        return o;
    }
}
