package dev.scorch.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.kernels.KernelSelection.Choice;
import dev.scorch.engine.kernels.KernelSelection.Impl;
import dev.scorch.engine.kernels.KernelSelection.Inputs;
import dev.scorch.engine.kernels.KernelSelection.Library;
import dev.scorch.engine.testing.ChildJvm;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

class KernelSelectionTest {
    private static final Library NOT_BUILT = Library.notLoaded("not in this build (it had no C compiler)");

    private static KernelSelection choose(int jdk, int lanes, Library library, Map<String, String> properties) {
        return KernelSelection.choose(new Inputs(jdk, lanes, "Linux", "amd64", properties, library));
    }

    private static void assertChoice(Impl impl, String kernel, String reason, Choice c) {
        assertEquals(new Choice(impl, kernel, reason), c);
    }

    @Test
    void theNativePropertyTurnsOffEveryNativeKernelAndEachSaysSo() {
        // A loaded library with AVX-512 in the inputs: the property wins (in a real JVM NativeCpu does not even load
        // it).
        KernelSelection k = choose(17, 16, Library.loaded(2), Map.of("scorch.native", "false"));
        assertChoice(
                Impl.VECTOR,
                "Java Vector API 2 x 4, 16 lanes",
                "-Dscorch.native=false; JDK 17: C2 spills the 2 x 6 tile",
                k.prefillGemm());
        assertEquals(4, k.gemmNr());
        assertEquals("-Dscorch.native=false", k.nativeLibrary());
        assertChoice(Impl.VECTOR, "Java Vector API, 16 lanes", "-Dscorch.native=false", k.attention());
        assertChoice(Impl.VECTOR, "Java Vector API, 16 lanes", "-Dscorch.native=false", k.vectorMath());
        for (Choice d : List.of(k.bf16Decoder(), k.fp8Decoder(), k.int4Decoder())) {
            assertChoice(Impl.VECTOR, "Java Vector API, 16 lanes", "-Dscorch.native=false", d);
        }
        assertChoice(
                Impl.VECTOR,
                "Java Vector API row-dot, 16 fp32 lanes (512-bit)",
                "one pass over the weights, straight from the mapping; no native row-dot: -Dscorch.native=false; BF16 rows"
                        + " 2 x 4 (JDK 17: C2 boxes the 4 x 4 block's lane folds)",
                k.decodeGemm());
        assertFalse(k.decodeBlock4x4());
        // The native row-dot on 8 lanes (AVX2), its lanes the Java kernel's, and its own switch.
        KernelSelection avx2 = choose(25, 8, Library.loaded(1), Map.of());
        assertChoice(
                Impl.NATIVE,
                "native C row-dot, 8 fp32 lanes (AVX2), BF16, FP8 and INT4 read in place; absorbed attention on BF16 kv_b_proj in place",
                "one pass over the weights, straight from the mapping, no row copies",
                avx2.decodeGemm());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API row-dot, 8 fp32 lanes (256-bit)",
                "one pass over the weights, straight from the mapping; no native row-dot: -Dscorch.native.rowdot=false",
                choose(25, 8, Library.loaded(1), Map.of(KernelSelection.NATIVE_ROWDOT, "false"))
                        .decodeGemm());
        // 16 lanes: the AVX-512 build of the same kernels.
        assertChoice(
                Impl.NATIVE,
                "native C row-dot, 16 fp32 lanes (AVX-512), BF16, FP8 and INT4 read in place; absorbed attention on BF16"
                        + " kv_b_proj in place",
                "one pass over the weights, straight from the mapping, no row copies",
                choose(25, 16, Library.loaded(2), Map.of()).decodeGemm());
        assertTrue(choose(25, 16, Library.loaded(1), Map.of())
                .decodeGemm()
                .reason()
                .contains("no native row-dot: no native row-dot for the JVM's 16-float vectors without AVX-512"));
        KernelSelection jdk25 = choose(25, 16, Library.loaded(2), Map.of(KernelSelection.NATIVE_ROWDOT, "false"));
        assertTrue(jdk25.decodeBlock4x4(), "16 lanes on JDK 21+");
        assertTrue(jdk25.decodeGemm().reason().endsWith("; BF16 rows 4 x 4, lanes folded in registers"));
        assertFalse(choose(25, 8, Library.loaded(1), Map.of()).decodeBlock4x4(), "8 lanes: AVX2's 16 registers");
        assertTrue(k.simd());
        // Only the exact word, as before: "FALSE" or "off" leave the native kernels on.
        for (String v : new String[] {"FALSE", "off", "true", ""}) {
            assertEquals(
                    Impl.NATIVE,
                    choose(17, 16, Library.loaded(2), Map.of("scorch.native", v))
                            .prefillGemm()
                            .impl(),
                    v);
        }
    }

    @Test
    void withoutTheNativeKernelJdk17RunsTheJava2x4TileAndJdk21On2x6() {
        KernelSelection jdk17 = choose(17, 8, NOT_BUILT, Map.of());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API 2 x 4, 8 lanes",
                "not in this build (it had no C compiler); JDK 17: C2 spills the 2 x 6 tile",
                jdk17.prefillGemm());
        assertEquals(4, jdk17.gemmNr());
        for (int jdk : new int[] {21, 25}) {
            KernelSelection k = choose(jdk, 8, NOT_BUILT, Map.of());
            assertChoice(
                    Impl.VECTOR,
                    "Java Vector API 2 x 6, 8 lanes",
                    "not in this build (it had no C compiler); JDK " + jdk + ": the 2 x 6 tile",
                    k.prefillGemm());
            assertEquals(6, k.gemmNr());
            // Only the GEMM's tile depends on the JDK.
            assertEquals(jdk17.attention(), k.attention());
            assertEquals(jdk17.fp8Decoder(), k.fp8Decoder());
        }
    }

    @Test
    void avx512RunsThe2x12TileAndTheAvx512KernelsOnAnyJdk() {
        KernelSelection k = choose(17, 16, Library.loaded(2), Map.of());
        assertChoice(Impl.NATIVE, "native C 2 x 12 on 32-row tiles (AVX-512)", "CPU has AVX-512", k.prefillGemm());
        assertEquals(12, k.gemmNr());
        assertEquals("loaded; CPU has AVX-512, AVX2 and FMA", k.nativeLibrary());
        assertChoice(
                Impl.NATIVE,
                "native C, 16 lanes (AVX-512)",
                "CPU has AVX-512; heads whose v_head is not a multiple of 16 run in Java",
                k.attention());
        assertChoice(Impl.NATIVE, "native C, 16 lanes (AVX-512)", "CPU has AVX-512", k.vectorMath());
        assertChoice(Impl.NATIVE, "native C", "beside the native GEMM tile", k.bf16Decoder());
        assertChoice(Impl.NATIVE, "native C", "beside the native GEMM tile", k.fp8Decoder());
        assertChoice(Impl.NATIVE, "native C, AVX-512 build", "beside the native GEMM tile", k.int4Decoder());
        KernelSelection jdk25 = choose(25, 16, Library.loaded(2), Map.of());
        assertEquals(k.prefillGemm(), jdk25.prefillGemm());
        assertEquals(12, jdk25.gemmNr());
    }

    @Test
    void avx2RunsThe2x6TileInCAndJavaAttention() {
        KernelSelection k = choose(17, 8, Library.loaded(1), Map.of());
        assertChoice(
                Impl.NATIVE,
                "native C 2 x 6 on 16-row tiles (AVX2)",
                "CPU has AVX2 and FMA, not AVX-512",
                k.prefillGemm());
        assertEquals(6, k.gemmNr(), "the native tile, also on JDK 17");
        assertEquals("loaded; CPU has AVX2 and FMA", k.nativeLibrary());
        assertChoice(Impl.VECTOR, "Java Vector API, 8 lanes", "CPU lacks AVX-512", k.attention());
        assertChoice(Impl.VECTOR, "Java Vector API, 8 lanes", "CPU lacks AVX-512", k.vectorMath());
        assertChoice(Impl.NATIVE, "native C, AVX2 build", "beside the native GEMM tile", k.int4Decoder());
    }

    @Test
    void theTileFollowsTheJvmsVectorsWhereTheyDifferFromTheCpus() {
        // AVX-512 CPU, JVM on 256-bit vectors (-XX:UseAVX=2): AVX2's tile, but the AVX-512 attention and vector math.
        KernelSelection narrow = choose(25, 8, Library.loaded(2), Map.of());
        assertChoice(
                Impl.NATIVE,
                "native C 2 x 6 on 16-row tiles (AVX2)",
                "CPU has AVX-512, but the JVM's vectors hold 8 floats",
                narrow.prefillGemm());
        assertEquals(Impl.NATIVE, narrow.attention().impl());
        assertEquals("native C, AVX-512 build", narrow.int4Decoder().kernel());
        // 512-bit vectors on a library that says the CPU lacks AVX-512: no native tile of 32 rows.
        KernelSelection wide = choose(25, 16, Library.loaded(1), Map.of());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API 2 x 6, 16 lanes",
                "CPU lacks AVX-512 for the 32-row tile; JDK 25: the 2 x 6 tile",
                wide.prefillGemm());
        assertChoice(
                Impl.VECTOR, "Java Vector API, 16 lanes", "CPU lacks AVX-512 for the 32-row tile", wide.fp8Decoder());
        // 128-bit vectors: no native tile, and FP8 and INT4 decode element by element.
        KernelSelection sse = choose(17, 4, Library.loaded(2), Map.of());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API 2 x 4, 4 lanes",
                "no native tile for the JVM's 4-float vectors; JDK 17: C2 spills the 2 x 6 tile",
                sse.prefillGemm());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API, 4 lanes",
                "no native tile for the JVM's 4-float vectors",
                sse.bf16Decoder());
        assertChoice(
                Impl.SCALAR,
                "element by element (Linear.row)",
                "the JVM's vectors hold 4 floats, under 8",
                sse.fp8Decoder());
        assertChoice(
                Impl.SCALAR,
                "element by element (Linear.row)",
                "the JVM's vectors hold 4 floats, under 8",
                sse.int4Decoder());
    }

    @Test
    void aMissingLibrarySaysWhy() {
        assertEquals(
                "not in this build (it had no C compiler)",
                choose(25, 16, NOT_BUILT, Map.of()).nativeLibrary());
        Library failed = Library.notLoaded("not loaded: java.lang.UnsatisfiedLinkError: no room");
        assertEquals(
                "not loaded: java.lang.UnsatisfiedLinkError: no room; JDK 25: the 2 x 6 tile",
                choose(25, 16, failed, Map.of()).prefillGemm().reason());
        KernelSelection noAvx2 = choose(25, 8, Library.loaded(0), Map.of());
        assertEquals("this CPU lacks AVX2 or FMA", noAvx2.nativeLibrary());
        assertChoice(Impl.VECTOR, "Java Vector API, 8 lanes", "this CPU lacks AVX2 or FMA", noAvx2.attention());
        // Elsewhere than x86-64 Linux the library is not even looked for (whatever the inputs say of it).
        KernelSelection mac =
                KernelSelection.choose(new Inputs(21, 4, "Mac OS X", "aarch64", Map.of(), Library.loaded(2)));
        assertEquals("library not built for Mac OS X aarch64", mac.nativeLibrary());
        assertChoice(
                Impl.VECTOR,
                "Java Vector API 2 x 6, 4 lanes",
                "library not built for Mac OS X aarch64; JDK 21: the 2 x 6 tile",
                mac.prefillGemm());
        assertEquals("library not built for Linux aarch64", KernelSelection.libraryRefusal(null, "Linux", "aarch64"));
        assertEquals(null, KernelSelection.libraryRefusal(null, "Linux", "x86_64"));
    }

    @Test
    void withoutTheVectorApiEveryCpuKernelIsScalar() {
        String why = "no Vector API in this JVM (--add-modules jdk.incubator.vector)";
        KernelSelection k = choose(25, 0, Library.loaded(2), Map.of());
        assertFalse(k.simd());
        assertChoice(Impl.SCALAR, "scalar FMA chains", why, k.prefillGemm());
        assertChoice(Impl.SCALAR, "scalar FMA chains", why, k.decodeGemm());
        assertChoice(Impl.SCALAR, "scalar, one query row at a time", why, k.attention());
        assertChoice(Impl.SCALAR, "scalar", why, k.vectorMath());
        for (Choice d : List.of(k.bf16Decoder(), k.fp8Decoder(), k.int4Decoder())) {
            assertChoice(Impl.SCALAR, "element by element (Linear.row)", why, d);
        }
        assertEquals(
                "the JVM's vectors hold 2 floats, under 4",
                choose(17, 2, NOT_BUILT, Map.of()).prefillGemm().reason());
    }

    @Test
    void attentionAndVectorMathTurnOffAlone() {
        KernelSelection noAttention = choose(17, 16, Library.loaded(2), Map.of("scorch.native.attention", "false"));
        assertChoice(
                Impl.VECTOR, "Java Vector API, 16 lanes", "-Dscorch.native.attention=false", noAttention.attention());
        assertEquals(Impl.NATIVE, noAttention.vectorMath().impl());
        assertEquals(Impl.NATIVE, noAttention.prefillGemm().impl());
        KernelSelection noVecMath = choose(17, 16, Library.loaded(2), Map.of("scorch.native.vecmath", "false"));
        assertChoice(Impl.VECTOR, "Java Vector API, 16 lanes", "-Dscorch.native.vecmath=false", noVecMath.vectorMath());
        assertEquals(Impl.NATIVE, noVecMath.attention().impl());
    }

    @Test
    void cudaExpertsRunMoeGemmOnlyWhenAskedFor() {
        for (String v : new String[] {"true", "TRUE", "True"}) {
            assertChoice(
                    Impl.CUDA,
                    "moe_gemm, one grouped kernel per projection over all experts",
                    "-Dscorch.cuda.moe-gemm=true",
                    choose(17, 16, NOT_BUILT, Map.of("scorch.cuda.moe-gemm", v)).cudaExperts());
        }
        for (String v : new String[] {"false", "yes", ""}) {
            assertChoice(
                    Impl.CUDA,
                    "one cuBLAS GEMM per expert, offsets read back",
                    "the default until moe_gemm passes the device check",
                    choose(17, 16, NOT_BUILT, Map.of("scorch.cuda.moe-gemm", v)).cudaExperts());
        }
    }

    @Test
    void cudaBatchedExpertsOnlyWhenAskedFor() {
        for (String v : new String[] {"true", "TRUE", "True"}) {
            KernelSelection k = choose(17, 16, NOT_BUILT, Map.of("scorch.cuda.batched-experts", v));
            assertTrue(k.cudaBatchedExperts(), v);
        }
        for (String v : new String[] {"yes", "1", ""}) {
            assertFalse(
                    choose(17, 16, NOT_BUILT, Map.of("scorch.cuda.batched-experts", v))
                            .cudaBatchedExperts(),
                    v);
        }
        assertChoice(
                Impl.CUDA,
                "one cuBLAS GEMM per expert, offsets read back",
                "the default until moe_gemm passes the device check",
                choose(17, 16, NOT_BUILT, Map.of()).cudaExperts());
    }

    /**
     * Every combination of inputs picks what the rules picked before the selection existed (NativeCpu's loading,
     * PackedGemm's NATIVE and NR, NativeAttention's and NativeVecMath's AVAILABLE, RowDecoder's species, CpuOps'
     * vectorApiUsable, CudaDevice's Boolean.getBoolean), written out here as they were.
     */
    @Test
    void chooseAgreesWithTheRulesItReplaced() {
        String[][] platforms = {
            {"Linux", "amd64"},
            {"Linux", "x86_64"},
            {"Linux", "aarch64"},
            {"Mac OS X", "x86_64"},
            {"Windows 11", "amd64"}
        };
        Library[] libraries = {Library.loaded(0), Library.loaded(1), Library.loaded(2), NOT_BUILT};
        String[] natives = {null, "false", "FALSE", "true"};
        String[] offs = {null, "false"};
        String[] cudas = {null, "true", "TRUE", "yes"};
        int cases = 0;
        for (int jdk : new int[] {17, 21, 25}) {
            for (int lanes : new int[] {0, 2, 4, 8, 16}) {
                for (String[] platform : platforms) {
                    for (Library library : libraries) {
                        for (String nat : natives) {
                            for (String attention : offs) {
                                for (String vecMath : offs) {
                                    for (String cuda : cudas) {
                                        Map<String, String> p = new HashMap<>();
                                        put(p, "scorch.native", nat);
                                        put(p, "scorch.native.attention", attention);
                                        put(p, "scorch.native.vecmath", vecMath);
                                        put(p, "scorch.cuda.batched-experts", cuda);
                                        KernelSelection k = KernelSelection.choose(
                                                new Inputs(jdk, lanes, platform[0], platform[1], p, library));
                                        String at =
                                                jdk + " " + lanes + " " + List.of(platform) + " " + library + " " + p;
                                        boolean loads = !"false".equals(nat)
                                                && platform[0].startsWith("Linux")
                                                && (platform[1].equals("amd64") || platform[1].equals("x86_64"))
                                                && library.whyNotLoaded() == null;
                                        boolean available = loads && library.isa() > 0;
                                        boolean avx512 = available && library.isa() == 2;
                                        int mr = 2 * lanes;
                                        boolean nativeGemm = available && (mr == 16 || mr == 32 && avx512);
                                        assertEquals(nativeGemm, k.prefillGemm().impl() == Impl.NATIVE, at);
                                        assertEquals(
                                                nativeGemm ? (mr == 32 ? 12 : 6) : jdk >= 21 ? 6 : 4, k.gemmNr(), at);
                                        boolean simd = lanes >= 4;
                                        assertEquals(simd, k.simd(), at);
                                        if (simd) { // CpuOps asks NativeAttention and NativeVecMath only on its Vector
                                            // API path
                                            assertEquals(
                                                    avx512 && !"false".equals(attention),
                                                    k.attention().impl() == Impl.NATIVE,
                                                    at);
                                            assertEquals(
                                                    avx512 && !"false".equals(vecMath),
                                                    k.vectorMath().impl() == Impl.NATIVE,
                                                    at);
                                        }
                                        assertEquals(lanes >= 4, k.bf16Decoder().impl() != Impl.SCALAR, at);
                                        assertEquals(lanes >= 8, k.fp8Decoder().impl() != Impl.SCALAR, at);
                                        assertEquals(lanes >= 8, k.int4Decoder().impl() != Impl.SCALAR, at);
                                        assertEquals(
                                                cuda != null && cuda.equalsIgnoreCase("true"),
                                                k.cudaBatchedExperts(),
                                                at);
                                        cases++;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assertEquals(3 * 5 * 5 * 4 * 4 * 2 * 2 * 4, cases);
    }

    private static void put(Map<String, String> m, String k, String v) {
        if (v != null) {
            m.put(k, v);
        }
    }

    /** This JVM's selection is what the kernels run: each one's switch, and the rule it applied before, on this JVM's facts. */
    @Test
    void currentIsWhatTheKernelsRun() {
        KernelSelection k = KernelSelection.current();
        int jdk = Runtime.version().feature();
        assertEquals(jdk, k.inputs().jdk());
        assertEquals(FloatVector.SPECIES_PREFERRED.length(), k.inputs().lanes());
        assertEquals(RowDotGemm.L, k.inputs().lanes());
        assertEquals(PackedGemm.MR, 2 * k.inputs().lanes());
        assertEquals(NativeCpu.library(), k.inputs().library());
        assertEquals(KernelSelection.choose(k.inputs()), k, "a pure function of its inputs");
        boolean nativeGemm =
                NativeCpu.available() && (PackedGemm.MR == 16 || PackedGemm.MR == 32 && NativeCpu.avx512());
        assertEquals(nativeGemm, PackedGemm.NATIVE);
        assertEquals(nativeGemm, k.prefillGemm().impl() == Impl.NATIVE);
        assertEquals(nativeGemm ? NativeCpu.nr(PackedGemm.MR) : jdk >= 21 ? 6 : 4, PackedGemm.NR);
        assertEquals(PackedGemm.NR, k.gemmNr());
        assertTrue(
                k.prefillGemm().kernel().contains("2 x " + PackedGemm.NR),
                k.prefillGemm().kernel());
        assertEquals(
                NativeCpu.available()
                        && NativeCpu.avx512()
                        && !"false".equals(System.getProperty("scorch.native.attention")),
                NativeAttention.AVAILABLE);
        assertEquals(NativeAttention.AVAILABLE, k.attention().impl() == Impl.NATIVE);
        assertEquals(
                NativeCpu.available()
                        && NativeCpu.avx512()
                        && !"false".equals(System.getProperty("scorch.native.vecmath")),
                NativeVecMath.AVAILABLE);
        assertEquals(NativeVecMath.AVAILABLE, k.vectorMath().impl() == Impl.NATIVE);
        assertEquals(RowDecoder.L >= 4, RowDecoder.H != null);
        assertEquals(RowDecoder.L >= 8, RowDecoder.B != null);
        assertEquals(RowDecoder.L >= 8, RowDecoder.INT4_WORDS != null);
        assertEquals(
                k.decodeGemm().impl() == Impl.NATIVE
                        ? RowDotGemm.L == 8
                                ? "native C row-dot, 8 fp32 lanes (AVX2), BF16, FP8 and INT4 read in place; absorbed attention on BF16 kv_b_proj in place"
                                : "native C row-dot, 16 fp32 lanes (AVX-512), BF16, FP8 and INT4 read in place; absorbed"
                                        + " attention on BF16 kv_b_proj in place"
                        : "Java Vector API row-dot, " + RowDotGemm.L + " fp32 lanes (" + RowDotGemm.F.vectorBitSize()
                                + "-bit)",
                k.decodeGemm().kernel());
        assertEquals(
                NativeCpu.available()
                        && (RowDotGemm.L == 8 || RowDotGemm.L == 16 && NativeCpu.avx512())
                        && !"false".equals(System.getProperty(KernelSelection.NATIVE_ROWDOT)),
                k.decodeGemm().impl() == Impl.NATIVE);
        assertEquals(k.decodeGemm().impl() == Impl.NATIVE && NativeCpu.mappedReadsGuarded(), RowDotGemm.NATIVE_ROWDOT);
        assertEquals(k.decodeBlock4x4(), RowDotGemm.BLOCK_4X4);
        try (CpuOps ops = new CpuOps(1)) {
            assertEquals(k.simd(), ops.simd());
        }
        if (NativeCpu.available()) {
            assertTrue(
                    k.nativeLibrary().startsWith("loaded; CPU has " + (NativeCpu.avx512() ? "AVX-512" : "AVX2")),
                    k.nativeLibrary());
        } else {
            assertTrue(NativeCpu.status().contains(k.nativeLibrary()), NativeCpu.status() + " / " + k.nativeLibrary());
        }
    }

    /** The properties reach the kernels through the selection in a JVM started with them. */
    @Test
    void aJvmStartedWithThePropertiesRunsWhatTheySay() throws Exception {
        int jdk = Runtime.version().feature();
        String off = ChildJvm.run(KernelSelectionProbe.class, List.of("-Dscorch.native=false"), Map.of(), 120)
                .output();
        assertTrue(off.contains("\ngemm.native=false\n"), off);
        assertTrue(off.contains("\ngemm.nr=" + (jdk >= 21 ? 6 : 4) + "\n"), off);
        assertTrue(off.contains("\nattention.native=false\n"), off);
        assertTrue(off.contains("\nvecmath.native=false\n"), off);
        assertTrue(off.contains("\nnative.status=off (-Dscorch.native=false)\n"), off);
        assertTrue(
                off.contains("prefill=Java Vector API 2 x " + (jdk >= 21 ? 6 : 4) + ", "
                        + FloatVector.SPECIES_PREFERRED.length() + " lanes (-Dscorch.native=false; JDK " + jdk),
                off);
        assertTrue(off.contains("\ncuda.batched=false\n"), off);

        String alone = ChildJvm.run(
                        KernelSelectionProbe.class,
                        List.of(
                                "-Dscorch.native.attention=false",
                                "-Dscorch.native.vecmath=false",
                                "-Dscorch.cuda.batched-experts=true"),
                        Map.of(),
                        120)
                .output();
        assertTrue(alone.contains("\nattention.native=false\n"), alone);
        assertTrue(alone.contains("\nvecmath.native=false\n"), alone);
        assertTrue(alone.contains("\ncuda.batched=true\n"), alone);
        assertTrue(alone.contains("\ngemm.native=" + PackedGemm.NATIVE + "\n"), "the GEMM as in this JVM: " + alone);
        if (NativeCpu.avx512()) {
            assertTrue(alone.contains("attention=Java Vector API, 16 lanes (-Dscorch.native.attention=false)"), alone);
            assertTrue(alone.contains("vectorMath=Java Vector API, 16 lanes (-Dscorch.native.vecmath=false)"), alone);
        }
    }

    @Test
    void theBf16ModesRunOnlyWhereTheUnitsAreAndSayWhich() {
        Library units = Library.loaded(2, Library.AVX512_BF16);
        Library amx = Library.loaded(2, Library.AVX512_BF16 | Library.AMX_BF16 | Library.AMX_TILE);
        Map<String, String> bf16x3 = Map.of("scorch.cpu.precision", "bf16x3");
        // Asked for, with the units: it runs, and says which units it found.
        KernelSelection k = choose(21, 16, units, bf16x3);
        assertEquals(CpuPrecision.BF16X3, k.cpuPrecision());
        assertChoice(
                Impl.NATIVE,
                "bf16x3: 3 bf16 parts a product on AVX512-BF16 (VDPBF16PS), 2 x 12 on 32-row tiles",
                "-Dscorch.cpu.precision=bf16x3; units: AVX512-BF16 yes, AMX-BF16 no",
                k.precision());
        assertEquals(
                CpuPrecision.BF16,
                choose(21, 16, amx, Map.of("scorch.cpu.precision", "BF16")).cpuPrecision());
        assertEquals(
                "-Dscorch.cpu.precision=bf16x2; units: AVX512-BF16 yes, AMX-BF16 yes (no AMX kernel yet)",
                choose(21, 16, amx, Map.of("scorch.cpu.precision", "bf16x2"))
                        .precision()
                        .reason());
        // Not asked for: fp32, the default.
        assertChoice(
                Impl.NATIVE,
                "fp32",
                "the default; units: AVX512-BF16 yes, AMX-BF16 no",
                choose(21, 16, units, Map.of()).precision());
        assertEquals(CpuPrecision.FP32, choose(21, 16, units, Map.of()).cpuPrecision());
        // Asked for without the units, or with them masked, or on an AVX2 machine, or without the library: fp32, and
        // why.
        assertChoice(
                Impl.NATIVE,
                "fp32",
                "bf16x3 asked, but CPU lacks AVX512-BF16; units: AVX512-BF16 no, AMX-BF16 no",
                choose(21, 16, Library.loaded(2), bf16x3).precision());
        KernelSelection masked =
                choose(21, 16, units, Map.of("scorch.cpu.precision", "bf16x3", "scorch.native.bf16", "false"));
        assertEquals(CpuPrecision.FP32, masked.cpuPrecision());
        assertEquals(
                "bf16x3 asked, but -Dscorch.native.bf16=false; units: AVX512-BF16 yes, AMX-BF16 no",
                masked.precision().reason());
        KernelSelection avx2 = choose(21, 8, Library.loaded(1), bf16x3);
        assertEquals(CpuPrecision.FP32, avx2.cpuPrecision());
        assertEquals(
                "bf16x3 asked, but the AVX-512 tile does not run: CPU has AVX2 and FMA, not AVX-512; units:"
                        + " AVX512-BF16 no, AMX-BF16 no",
                avx2.precision().reason());
        assertEquals(
                avx2.prefillGemm(), choose(21, 8, Library.loaded(1), Map.of()).prefillGemm());
        assertEquals(CpuPrecision.FP32, choose(21, 16, NOT_BUILT, bf16x3).cpuPrecision());
        assertEquals(
                CpuPrecision.FP32,
                choose(21, 16, units, Map.of("scorch.native", "false", "scorch.cpu.precision", "bf16"))
                        .cpuPrecision());
        // Decode: bf16 parts on the 16-lane native row-dot where prefill's run; else fp32, and why.
        assertChoice(
                Impl.NATIVE,
                "bf16x3: BF16 weights read in place against 3 bf16 parts of x on VDPBF16PS; FP8, INT4 and F32 weights"
                        + " and the absorbed attention in fp32",
                "-Dscorch.cpu.precision=bf16x3",
                k.decodePrecision());
        assertEquals(
                "bf16x3 asked, but no native row-dot: one pass over the weights, straight from the mapping; no native"
                        + " row-dot: -Dscorch.native.rowdot=false; BF16 rows 4 x 4, lanes folded in registers",
                choose(21, 16, units, Map.of("scorch.cpu.precision", "bf16x3", "scorch.native.rowdot", "false"))
                        .decodePrecision()
                        .reason());
        assertEquals("fp32", masked.decodePrecision().kernel());
        assertEquals(masked.precision().reason(), masked.decodePrecision().reason());
        assertEquals("fp32", choose(21, 16, units, Map.of()).decodePrecision().kernel());
        assertEquals("fp32", avx2.decodePrecision().kernel());
        // A value that names no mode: fp32, and the message says what would.
        assertEquals(
                "unknown CPU precision 'fp16': expected fp32, bf16x3, bf16x2 or bf16; units: AVX512-BF16 yes,"
                        + " AMX-BF16 no",
                choose(21, 16, units, Map.of("scorch.cpu.precision", "fp16"))
                        .precision()
                        .reason());
    }

    /** A JVM told to mask the units runs fp32 whatever precision it is asked for; one asked for bf16x3 runs it where it can. */
    @Test
    void aJvmWithTheUnitsMaskedRunsFp32() throws Exception {
        String masked = ChildJvm.run(
                        KernelSelectionProbe.class,
                        List.of("-Dscorch.cpu.precision=bf16x3", "-Dscorch.native.bf16=false"),
                        Map.of(),
                        120)
                .output();
        assertTrue(masked.contains("\ngemm.precision=fp32\n"), masked);
        assertTrue(masked.contains("\ncpuops.precision=fp32\n"), masked);
        String asked = ChildJvm.run(KernelSelectionProbe.class, List.of("-Dscorch.cpu.precision=bf16x3"), Map.of(), 120)
                .output();
        String runs = PackedGemm.runs(CpuPrecision.BF16X3) ? "bf16x3" : "fp32";
        assertTrue(asked.contains("\ngemm.precision=" + runs + "\n"), asked);
        assertTrue(asked.contains("\ncpuops.precision=" + runs + "\n"), asked);
    }

    @Test
    void jsonAndLogLineNameEveryKernel() {
        KernelSelection k = choose(17, 16, Library.loaded(2), Map.of("scorch.native.attention", "false"));
        JsonNode j = k.toJson();
        assertEquals(
                List.of(
                        "prefill_gemm",
                        "cpu_precision",
                        "decode_gemm",
                        "decode_precision",
                        "bf16_decoder",
                        "fp8_decoder",
                        "int4_decoder",
                        "attention",
                        "vector_math",
                        "cuda_experts",
                        "gemm_nr",
                        "native_library",
                        "inputs"),
                iterable(j.fieldNames()));
        assertEquals("native", j.get("prefill_gemm").get("impl").asText());
        assertEquals(
                "native C 2 x 12 on 32-row tiles (AVX-512)",
                j.get("prefill_gemm").get("kernel").asText());
        assertEquals("CPU has AVX-512", j.get("prefill_gemm").get("reason").asText());
        assertEquals("vector", j.get("attention").get("impl").asText());
        assertEquals(
                "-Dscorch.native.attention=false",
                j.get("attention").get("reason").asText());
        assertEquals(12, j.get("gemm_nr").asInt());
        assertEquals(
                "{\"jdk\":17,\"vector_lanes\":16,\"os\":\"Linux\",\"arch\":\"amd64\",\"properties\":{\"scorch.native.attention\":\"false\"}}",
                j.get("inputs").toString());
        assertEquals(
                "prefill_gemm: native C 2 x 12 on 32-row tiles (AVX-512) (CPU has AVX-512); cpu_precision: fp32 (the default; units:"
                        + " AVX512-BF16 no, AMX-BF16 no); decode_gemm: native C row-dot, 16 fp32 lanes (AVX-512), BF16, FP8"
                        + " and INT4 read in place; absorbed attention on BF16 kv_b_proj in place (one pass over"
                        + " the weights, straight from the mapping, no row copies); decode_precision: fp32 (the default;"
                        + " units: AVX512-BF16 no, AMX-BF16 no); bf16_decoder: native C "
                        + "(beside the native GEMM tile); fp8_decoder: native C (beside the native GEMM tile); int4_decoder: native C, AVX-512 build "
                        + "(beside the native GEMM tile); attention: Java Vector API, 16 lanes (-Dscorch.native.attention=false); vector_math: native "
                        + "C, 16 lanes (AVX-512) (CPU has AVX-512); cuda_experts: one cuBLAS GEMM per expert, offsets read "
                        + "back (the default until moe_gemm passes the device check); native library: loaded; CPU has AVX-512, AVX2 and FMA; "
                        + "JDK 17, 16 float lanes, Linux amd64, "
                        + "{scorch.native.attention=false}",
                k.describe());
    }

    private static List<String> iterable(java.util.Iterator<String> it) {
        List<String> l = new java.util.ArrayList<>();
        it.forEachRemaining(l::add);
        return l;
    }
}
