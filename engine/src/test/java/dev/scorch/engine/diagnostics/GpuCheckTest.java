package dev.scorch.engine.diagnostics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.device.Buf;
import dev.scorch.engine.device.Device;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.device.host.HostDevice;
import dev.scorch.engine.model.GpuModel;
import dev.scorch.engine.model.ModelWeights;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.testing.DemoModels;
import dev.scorch.engine.testing.TestModels;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The device check's model-vs-CPU section, which bin/gpu-check runs on CUDA, run here on {@link HostDevice} over the
 * INT4 demo: what it reports, so a GPU session's first run does not find a fault in the check itself; and its pipeline
 * hand-off check (device to device against through the host) over HostDevices.
 */
class GpuCheckTest {
    @TempDir
    Path dir;

    @Test
    void int4ModelVsCpuReportsScoresRoutesAndBytes() throws Exception {
        ObjectNode out = new ObjectMapper().createObjectNode();
        ObjectNode into = out.putObject("tiny_int4");
        Path json = dir.resolve("gpu-check.json");
        GpuCheck.modelVsCpu(
                DemoModels.tinyInt4(), 2, List.of(GemmPrecision.FP32), false, into, null, out, json, HostDevice::new);
        ObjectNode fp32 = (ObjectNode) into.get("FP32");
        assertTrue(fp32.get("max_abs_dlogprob_vs_cpu").asDouble() <= 1e-4, fp32.toString());
        assertEquals(0, fp32.get("route_mismatches_vs_cpu").asInt(), fp32.toString());
        assertEquals(0, fp32.get("sequences_with_argmax_diff_vs_cpu").asInt(), fp32.toString());
        assertEquals(0.0, fp32.get("max_abs_dlogprob_batched_vs_alone").asDouble(), fp32.toString());
        assertTrue(fp32.get("weight_bytes").asLong() > 0, fp32.toString());
        assertEquals(
                "INT4 group 32 (compressed-tensors pack-quantized)",
                into.get("quantization").asText());
        assertEquals(out.toString(), new ObjectMapper().readTree(json.toFile()).toString(), "flushed as it goes");
    }

    @Test
    void theHandOffCheckPassesOnHostDevicesAndCatchesADifference() {
        ModelWeights w = ModelWeights.open(TestModels.conformanceModel());
        List<ScoreRequest> reqs = List.of(
                new ScoreRequest(new int[] {5, 9, 2, 7}, 1, 3, LogitsMode.LAST),
                new ScoreRequest(new int[] {3, 1, 4, 1, 5, 9}, 1, 0, LogitsMode.NONE),
                new ScoreRequest(new int[] {8, 8}, 1, 0, LogitsMode.NONE));
        assertTrue(GpuCheck.handOffKeepsBits(w, reqs, HostDevice::new, HostDevice::new));
        // a second device whose copies land one float off: the check must see it
        assertFalse(GpuCheck.handOffKeepsBits(w, reqs, () -> offByOne(new HostDevice()), HostDevice::new));
    }

    /** dev whose device-to-device copies add 1 to the first float copied. */
    private static Device offByOne(HostDevice dev) {
        return (Device) Proxy.newProxyInstance(
                Device.class.getClassLoader(), new Class<?>[] {Device.class}, (proxy, m, args) -> {
                    Object r;
                    try {
                        r = m.invoke(dev, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("copyTo") && (Boolean) r) {
                        Buf dst = ((Buf) args[2]).slice(0, 1);
                        float[] one = new float[1];
                        ((Device) args[1]).read(dst, one, 0, 1);
                        one[0] += 1;
                        ((Device) args[1]).write(dst, one, 0, 1);
                    }
                    return r;
                });
    }

    /** The device check's decode-graphs line on the INT4 demo through the CPU twin of graph capture. */
    @Test
    void decodeGraphsReportsBothWays() {
        ObjectNode into = new ObjectMapper().createObjectNode();
        try (GpuModel m = GpuModel.load(
                ModelWeights.open(DemoModels.tinyInt4()),
                new GraphTwin(new HostDevice()).device(),
                GemmPrecision.BF16X3)) {
            GpuCheck.decodeGraphs(m, m.config(), 2, 5, 6, into);
        }
        ObjectNode r = (ObjectNode) into.get("decode_graphs_b2");
        assertTrue(r.get("greedy_tokens_equal").asBoolean(), r.toString());
        assertEquals(0.0, r.get("last_step_max_abs_dlogit").asDouble(), r.toString());
        assertTrue(r.get("ms_per_step_with").asDouble() > 0, r.toString());
    }
}
