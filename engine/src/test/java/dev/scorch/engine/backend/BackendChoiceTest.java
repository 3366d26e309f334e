package dev.scorch.engine.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.device.cuda.Cuda;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.kernels.CpuPrecision;
import dev.scorch.engine.kernels.KernelSelection;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** Every branch of the per-task backend choice, with CUDA's availability stubbed and its probe calls counted. */
class BackendChoiceTest {
    static final Cuda.Availability TWO_GPUS =
            new Cuda.Availability(true, 2, "2 GPU(s), driver CUDA 13.0, runtime 13.0");
    static final Cuda.Availability NONE = new Cuda.Availability(false, 0, "CUDA libraries not loadable: no libcudart");

    /** A probe that counts its calls. */
    static final class Probe implements Supplier<Cuda.Availability> {
        final Cuda.Availability answer;
        final AtomicInteger calls = new AtomicInteger();

        Probe(Cuda.Availability answer) {
            this.answer = answer;
        }

        @Override
        public Cuda.Availability get() {
            calls.incrementAndGet();
            return answer;
        }
    }

    @Test
    void modesParseInAnyCaseAndABadOneNamesTheAcceptedValues() {
        assertEquals(BackendMode.AUTO, BackendMode.parse("auto"));
        assertEquals(BackendMode.CPU, BackendMode.parse("CPU"));
        assertEquals(BackendMode.CUDA, BackendMode.parse(" Cuda "));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BackendMode.parse("gpu"));
        assertTrue(e.getMessage().contains("'gpu'") && e.getMessage().contains("auto, cpu, cuda"), e.getMessage());
        assertEquals("cuda", BackendMode.CUDA.flag());
    }

    @Test
    void autoWithAGpuAndCudaRunsOnTheTasksFirstAddress() {
        Probe p = new Probe(TWO_GPUS);
        BackendChoice c = BackendChoice.choose(BackendMode.AUTO, List.of("1"), p);
        assertEquals(new BackendChoice(BackendChoice.Kind.CUDA, 1, c.reason()), c);
        assertTrue(c.cuda());
        assertTrue(c.reason().contains("task holds GPU 1") && c.reason().contains(TWO_GPUS.detail()), c.reason());
        assertEquals(1, p.calls.get());

        BackendChoice two = BackendChoice.choose(BackendMode.AUTO, List.of("0", "1"), new Probe(TWO_GPUS));
        assertEquals(0, two.gpuOrdinal());
        assertTrue(two.reason().contains("first of [0, 1]"), two.reason());
    }

    @Test
    void autoWithoutAGpuRunsOnCpuWithoutProbingCuda() {
        Probe p = new Probe(TWO_GPUS);
        BackendChoice c = BackendChoice.choose(BackendMode.AUTO, List.of(), p);
        assertEquals(new BackendChoice(BackendChoice.Kind.CPU, -1, "task holds no GPU"), c);
        assertFalse(c.cuda());
        assertEquals(0, p.calls.get(), "no GPU address: CUDA's native libraries need not load");
        assertEquals(
                BackendChoice.Kind.CPU,
                BackendChoice.choose(BackendMode.AUTO, null, p).kind());
    }

    @Test
    void autoWithAGpuButNoCudaFallsBackToCpuNamingWhy() {
        Probe p = new Probe(NONE);
        BackendChoice c = BackendChoice.choose(BackendMode.AUTO, List.of("0"), p);
        assertEquals(BackendChoice.Kind.CPU, c.kind());
        assertEquals(-1, c.gpuOrdinal());
        assertTrue(c.reason().contains("CUDA unavailable: " + NONE.detail()), c.reason());
        assertEquals(1, p.calls.get());
    }

    @Test
    void cpuNeverProbesCudaNorReadsTheAddresses() {
        Probe p = new Probe(TWO_GPUS);
        BackendChoice c = BackendChoice.choose(BackendMode.CPU, List.of("not-a-number"), p);
        assertEquals(BackendChoice.Kind.CPU, c.kind());
        assertEquals(-1, c.gpuOrdinal());
        assertEquals(0, p.calls.get());
    }

    @Test
    void cudaTakesTheAssignedAddressOrOrdinalZeroInLocalMode() {
        BackendChoice assigned = BackendChoice.choose(BackendMode.CUDA, List.of("1"), new Probe(TWO_GPUS));
        assertEquals(BackendChoice.Kind.CUDA, assigned.kind());
        assertEquals(1, assigned.gpuOrdinal());
        assertTrue(assigned.reason().contains("task holds GPU 1"), assigned.reason());

        BackendChoice local = BackendChoice.choose(BackendMode.CUDA, List.of(), new Probe(TWO_GPUS));
        assertEquals(0, local.gpuOrdinal());
        assertTrue(local.reason().contains("no GPU, so GPU 0"), local.reason());
    }

    @Test
    void cudaWithoutCudaFailsFastNamingTheReason() {
        Probe p = new Probe(NONE);
        IllegalStateException e =
                assertThrows(IllegalStateException.class, () -> BackendChoice.choose(BackendMode.CUDA, List.of(), p));
        assertEquals("--backend cuda: CUDA unavailable: " + NONE.detail(), e.getMessage());
        assertEquals(1, p.calls.get());
    }

    @Test
    void aNonIntegerAddressIsAnErrorNamingIt() {
        for (BackendMode m : List.of(BackendMode.AUTO, BackendMode.CUDA)) {
            for (String bad : List.of("gpu0", "-1", "")) {
                Probe p = new Probe(TWO_GPUS);
                IllegalArgumentException e =
                        assertThrows(IllegalArgumentException.class, () -> BackendChoice.choose(m, List.of(bad), p));
                assertTrue(e.getMessage().contains("GPU address '" + bad + "'"), e.getMessage());
                assertEquals(0, p.calls.get(), "the address is checked before CUDA loads");
            }
        }
    }

    @Test
    void anAddressBeyondTheGpusCudaSeesIsAnError() {
        for (BackendMode m : List.of(BackendMode.AUTO, BackendMode.CUDA)) {
            IllegalStateException e = assertThrows(
                    IllegalStateException.class, () -> BackendChoice.choose(m, List.of("2"), new Probe(TWO_GPUS)));
            assertTrue(e.getMessage().contains("GPU address 2 but CUDA sees 2 GPU(s)"), e.getMessage());
        }
    }

    @Test
    void theRealProbeAnswersWithoutThrowing() {
        Cuda.Availability a = Cuda.probe();
        assertFalse(a.detail().isEmpty());
        BackendChoice c = BackendChoice.choose(BackendMode.AUTO, List.of("0"), Cuda::probe);
        assertEquals(a.available() ? BackendChoice.Kind.CUDA : BackendChoice.Kind.CPU, c.kind(), c.reason());
    }

    /**
     * A job's CPU precision: the kernels in the mode this CPU runs of the one asked (the kernel selection's answer, fp32
     * where AVX512-BF16 is missing), one set per thread count and mode shared by every task asking it, and this JVM's
     * default where none is asked.
     */
    @Test
    void cpuOpsRunTheAskedPrecisionWhereItRunsOneSetPerThreadsAndMode() {
        KernelSelection k = KernelSelection.current();
        for (CpuPrecision asked : CpuPrecision.values()) {
            CpuPrecision runs = k.withPrecision(asked.id()).cpuPrecision();
            CpuOps ops = (CpuOps) BackendChoice.cpuOps(2, asked);
            assertEquals(runs, ops.precision(), asked.id());
            assertEquals(2, ops.threads());
            assertSame(ops, BackendChoice.cpuOps(2, asked), "one set per JVM, threads and mode");
            if (runs == CpuPrecision.FP32) {
                assertSame(ops, BackendChoice.cpuOps(2, CpuPrecision.FP32), asked.id() + " falls back to fp32's set");
            }
            assertNotSame(ops, BackendChoice.cpuOps(1, asked), "another thread count, another pool");
        }
        assertEquals(k.cpuPrecision(), ((CpuOps) BackendChoice.cpuOps(2, null)).precision());
        assertSame(BackendChoice.cpuOps(2, null), BackendChoice.cpuOps(2, null));
    }
}
