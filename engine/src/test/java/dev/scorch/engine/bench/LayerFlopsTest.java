package dev.scorch.engine.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.config.ModelConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The benchmark's arithmetic against figures worked out by hand from Kimi-K2-Instruct's config.json. */
class LayerFlopsTest {
    @TempDir
    Path tmp;

    /** Kimi-K2-Instruct's config, with layers layers and experts routed experts (the k2-layers model's shape). */
    private ModelConfig k2(int layers, int experts) throws Exception {
        ObjectMapper json = new ObjectMapper();
        Path src = Path.of(LayerFlopsTest.class
                .getResource("/configs/kimi-k2-instruct/config.json")
                .toURI());
        ObjectNode root = (ObjectNode) json.readTree(src.toFile());
        root.put("num_hidden_layers", layers);
        root.put("n_routed_experts", experts);
        Path f = Files.createTempDirectory(tmp, "k2").resolve("config.json");
        json.writeValue(f.toFile(), root);
        return ModelConfig.read(f);
    }

    @Test
    void perTokenFlopsOfEachPart() throws Exception {
        ModelConfig c = k2(61, 384);
        // q_a 7168 x 1536 = 11,010,048; q_b 1536 x (64 x 192) = 18,874,368; kv_a 7168 x (512 + 64) = 4,128,768;
        // kv_b 512 x 64 x (128 + 128) = 8,388,608; o 64 x 128 x 7168 = 58,720,256: 101,122,048 weights, 2 FLOPs each.
        assertEquals(202_244_096.0, LayerFlops.attentionProjections(c));
        assertEquals(40_960.0, LayerFlops.attentionPerKey(c)); // 2 x 64 heads x (192 + 128)
        assertEquals(32.5, LayerFlops.meanKeys(64)); // (1 + 2 + ... + 64) / 64
        assertEquals(792_723_456.0, LayerFlops.denseMlp(c)); // 2 x 3 x 7168 x 18432
        assertEquals(792_723_456.0, LayerFlops.experts(c)); // 2 x 3 x 7168 x 2048 x (8 routed + 1 shared)
        assertEquals(5_505_024.0, LayerFlops.router(c)); // 2 x 7168 x 384
        assertEquals(2_348_810_240.0, LayerFlops.head(c)); // 2 x 7168 x 163840
        // first_k_dense_replace 1: layer 0 dense, the rest MoE; 32.5 keys x 40,960 = 1,331,200.
        assertEquals(202_244_096.0 + 1_331_200 + 792_723_456, LayerFlops.layer(c, 0, 32.5));
        assertEquals(202_244_096.0 + 1_331_200 + 5_505_024 + 792_723_456, LayerFlops.layer(c, 1, 32.5));
        // 996,298,752 + 60 x 1,001,803,776 + 2,348,810,240
        assertEquals(63_453_335_552.0, LayerFlops.model(c, 32.5));
    }

    @Test
    void expertsChangeOnlyTheRouter() throws Exception {
        ModelConfig bench = k2(2, 8);
        ModelConfig full = k2(61, 384);
        assertEquals(114_688.0, LayerFlops.router(bench)); // 2 x 7168 x 8
        assertEquals(LayerFlops.experts(full), LayerFlops.experts(bench));
        assertEquals(
                LayerFlops.layer(full, 1, 100) - LayerFlops.layer(bench, 1, 100),
                LayerFlops.router(full) - LayerFlops.router(bench));
    }

    @Test
    void extrapolatesTheFullModelFromTwoLayers() throws Exception {
        ModelConfig bench = k2(2, 8);
        // 64 tokens a pass; a dense layer 0.1 s, a MoE layer 0.2 s, the rest 0.05 s.
        FullModelEstimate e = new FullModelEstimate(bench, 61, 1, 384, 64, 64, 0.1, 0.2, 0.05);
        assertEquals(996_298_752.0, e.denseFlops());
        assertEquals(996_413_440.0, e.benchMoeFlops()); // router of 8: 114,688
        assertEquals(1_001_803_776.0, e.fullMoeFlops()); // router of 384: 5,505,024
        assertEquals(63_453_335_552.0, e.fullFlopsPerToken());
        // 0.1 + 60 x 0.2 x (1,001,803,776 / 996,413,440 = 1.0054097...) + 0.05
        assertEquals(12.21491686021417, e.fullSeconds(), 1e-12);
        assertEquals(5.239495342654166, e.tokensPerSecond(), 1e-12);
        assertEquals(0.33246345610057604e12, e.flopsPerSecond(), 1e-3);

        // The brief's split, DeepSeek-V3's: 3 dense + 58 MoE.
        FullModelEstimate v3 = new FullModelEstimate(bench, 61, 3, 384, 64, 64, 0.1, 0.2, 0.05);
        assertEquals(63_442_325_504.0, v3.fullFlopsPerToken());
        assertEquals(12.012752964873702, v3.fullSeconds(), 1e-12);

        List<String> lines = e.lines(DevicePeak.stated("test", 1));
        assertTrue(
                lines.get(2).contains("1 x 0.1000 s (dense) + 60 x 0.2000 s x 1.00541 (MoE) + 0.0500 s"), lines.get(2));
        assertTrue(lines.get(2).endsWith("= 12.2149 s"), lines.get(2));
        assertTrue(lines.get(3).contains("64 tokens / 12.2149 s = 5.24 tokens/s"), lines.get(3));
        assertTrue(lines.get(4).contains("= 63.45 G; x 5.24 tokens/s = 332.5 GFLOP/s"), lines.get(4));
        assertTrue(lines.get(4).contains("MFU 33.25 % of test"), lines.get(4));

        assertThrows(IllegalArgumentException.class, () -> new FullModelEstimate(bench, 61, 62, 384, 64, 64, 1, 1, 0));
        assertThrows(IllegalArgumentException.class, () -> new FullModelEstimate(bench, 61, 1, 4, 64, 64, 1, 1, 0));
    }

    @Test
    void mfuAgainstTheDatasheetPeaks() {
        DevicePeak h200 =
                DevicePeak.ofCudaName("cuda:0 NVIDIA H200 (sm_90, 139.8 GiB)").orElseThrow();
        assertEquals("H200 SXM", h200.name());
        assertEquals(0.4, h200.mfuBf16(395.76e12), 1e-12); // 395.76 / 989.4
        assertEquals(0.2, h200.mfuFp8(395.78e12), 1e-12); // 395.78 / 1978.9
        assertEquals("MFU 40.00 % of the BF16 peak, 20.00 % of the FP8 peak (H200 SXM)", Mfu.describe(h200, 395.76e12));
        assertEquals(
                "H100 SXM",
                DevicePeak.ofCudaName("NVIDIA H100 80GB HBM3").orElseThrow().name());
        assertTrue(DevicePeak.ofCudaName("NVIDIA H100 PCIe").isEmpty(), "other clocks");
        assertTrue(DevicePeak.ofCudaName("NVIDIA H200 NVL").isEmpty(), "other clocks");
        assertTrue(DevicePeak.ofCudaName("NVIDIA A100-SXM4-80GB").isEmpty());
        assertEquals(0.25, DevicePeak.stated("CPU", 0.2).mfuBf16(50e9), 1e-12);
        assertThrows(IllegalArgumentException.class, () -> DevicePeak.stated("CPU", 0));
        assertEquals(
                "H200 SXM: BF16 989.4 TFLOP/s, FP8 1978.9 TFLOP/s (NVIDIA datasheet, dense (half the 2:4-sparsity figure))",
                h200.describe());
        assertEquals(
                "CPU: 69.8 GFLOP/s (stated with --peak-tflops)",
                DevicePeak.stated("CPU", 0.0698).describe());
    }

    @Test
    void cpuPeakCountsEveryLaneOfEveryChain() {
        // 2 threads x 1000 iterations x 12 chains x lanes x 2 FLOPs
        assertEquals(
                2.0 * 2 * 1000 * 12 * jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.length(),
                CpuPeak.flops(2, 1000));
        assertTrue(CpuPeak.measure(1, 100_000) > 1e8, "a CPU runs more than 0.1 GFLOP/s");
    }
}
