package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.kernels.KernelSelection;
import dev.scorch.engine.model.ModelInfo;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * inspect on quantized and wrapped checkpoints: storage per tensor group, the K2.5 wrapper, unpacked parameter counts; and
 * the kernels this JVM runs.
 */
class InspectCommandTest {
    @TempDir
    Path tmp;

    private Path demo(String name, DemoModelWriter.Weights weights, boolean wrap) throws Exception {
        Path dir = tmp.resolve(name);
        new DemoModelWriter(DemoPreset.TINY, weights, true, wrap, 1).write(dir);
        return dir;
    }

    private static String text(ModelInfo info) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        InspectCommand.print(info, new PrintStream(b, true, StandardCharsets.UTF_8));
        return b.toString(StandardCharsets.UTF_8);
    }

    @Test
    void int4CheckpointReportsStoragePerGroupAndUnpackedParameters() throws Exception {
        ModelInfo info = ModelInfo.of(demo("int4", DemoModelWriter.Weights.INT4, false));
        ModelInfo bf16 = ModelInfo.of(demo("bf16", DemoModelWriter.Weights.BF16, false));
        String out = text(info);
        assertTrue(
                out.contains("storage        routed experts: INT4 group 32 (compressed-tensors pack-quantized); "
                        + "embedding, attention, dense MLP, router, shared experts, lm_head: BF16"),
                out);
        assertTrue(out.contains("quantization   INT4 group 32 (compressed-tensors pack-quantized)"), out);
        assertTrue(out.contains("validation     OK"), out);
        assertFalse(out.contains("wrapper"), out);
        // Parameters are the model's weights whatever their storage: the INT4 model has the BF16 one's count.
        assertEquals(bf16.parameters(), info.parameters());
        assertEquals(WeightLayout.parameters(info.config()), info.parameters());
        long experts = 2L * 8 * 3 * 96 * 192; // two MoE layers, 8 experts, 3 linears of 96 x 192
        assertEquals(experts, info.parametersByDtype().get("INT4"));
        assertEquals(
                info.parameters(),
                info.parametersByDtype().values().stream()
                        .mapToLong(Long::longValue)
                        .sum());
        assertTrue(
                info.bytesOnDisk() < bf16.bytesOnDisk() - experts,
                "packed experts take about a quarter of their BF16 bytes");
        JsonNode j = InspectCommand.toJson(info);
        assertEquals("DeepseekV3ForCausalLM", j.get("architecture").asText());
        assertEquals("INT4_GROUP", j.get("quantization").get("scheme").asText());
        assertEquals(32, j.get("quantization").get("group_size").asInt());
        assertEquals(
                "[\"lm_head\",\"re:.*self_attn.*\",\"re:.*shared_experts.*\",\"re:.*mlp\\\\.(gate|up|gate_up|down)_proj.*\"]",
                j.get("quantization").get("ignore").toString());
        assertEquals(
                "[\"routed experts\"]",
                j.get("storage_by_group")
                        .get("INT4 group 32 (compressed-tensors pack-quantized)")
                        .toString());
        assertEquals(experts, j.get("parameters_by_dtype").get("INT4").asLong());
    }

    @Test
    void k25WrapperIsNamedWithItsIgnoredVisionTensors() throws Exception {
        ModelInfo info = ModelInfo.of(demo("k25", DemoModelWriter.Weights.INT4, true));
        String out = text(info);
        assertTrue(out.contains("architecture   KimiK25ForConditionalGeneration (model_type kimi_k25)"), out);
        assertTrue(
                out.contains(
                        "wrapper        text model DeepseekV3ForCausalLM of KimiK25ForConditionalGeneration, weights under "
                                + "language_model.; vision_tower.*, mm_projector.* ignored: 7 tensors"),
                out);
        assertTrue(out.contains("routed experts: INT4 group 32"), out);
        assertTrue(out.contains("validation     OK"), out);
        JsonNode j = InspectCommand.toJson(info);
        assertEquals("KimiK25ForConditionalGeneration", j.get("architecture").asText());
        assertEquals("DeepseekV3ForCausalLM", j.get("text_model").asText());
        assertEquals("language_model.", j.get("weight_prefix").asText());
        assertEquals(7, j.get("multimodal_ignored_tensors").asInt());
        assertEquals(
                ModelInfo.of(demo("plain", DemoModelWriter.Weights.INT4, false)).parameters(), info.parameters());
    }

    @Test
    void fp8CompressedTensorsShowsTheGroupsItLeavesInBf16() throws Exception {
        String out = text(ModelInfo.of(demo("fp8ct", DemoModelWriter.Weights.FP8_CT, false)));
        assertTrue(
                out.contains(
                        "storage        attention (part), dense MLP, routed experts, shared experts: FP8 E4M3 128x128 blocks "
                                + "(compressed-tensors float-quantized); embedding, attention (part), router, lm_head: BF16"),
                out);
        assertTrue(out.contains("dynamic activation quantization not emulated"), out);
    }

    @Test
    void jsonAndTextNameTheKernelsThisJvmRuns() throws Exception {
        ModelInfo info = ModelInfo.of(demo("kernels", DemoModelWriter.Weights.BF16, false));
        KernelSelection k = KernelSelection.current();
        JsonNode kernels = InspectCommand.toJson(info).get("kernels");
        for (String name : new String[] {
            "prefill_gemm",
            "decode_gemm",
            "bf16_decoder",
            "fp8_decoder",
            "int4_decoder",
            "attention",
            "vector_math",
            "cuda_experts"
        }) {
            JsonNode c = kernels.get(name);
            assertTrue(c.get("impl").asText().matches("native|vector|scalar|cuda"), name + ": " + c);
            assertFalse(c.get("kernel").asText().isEmpty(), name + ": " + c);
            assertFalse(c.get("reason").asText().isEmpty(), name + ": " + c);
        }
        assertEquals(
                k.prefillGemm().kernel(),
                kernels.get("prefill_gemm").get("kernel").asText());
        assertEquals(
                k.prefillGemm().reason(),
                kernels.get("prefill_gemm").get("reason").asText());
        assertEquals(
                k.prefillGemm().impl().name().toLowerCase(java.util.Locale.ROOT),
                kernels.get("prefill_gemm").get("impl").asText());
        assertEquals(
                k.attention().kernel(), kernels.get("attention").get("kernel").asText());
        assertEquals(k.gemmNr(), kernels.get("gemm_nr").asInt());
        assertEquals(k.nativeLibrary(), kernels.get("native_library").asText());
        assertEquals(
                Runtime.version().feature(), kernels.get("inputs").get("jdk").asInt());
        assertEquals(
                k.inputs().lanes(), kernels.get("inputs").get("vector_lanes").asInt());
        assertEquals(
                System.getProperty("os.arch"), kernels.get("inputs").get("arch").asText());
        assertTrue(
                text(info)
                        .contains(
                                "kernels        prefill GEMM " + k.prefillGemm().kernel() + "; decode "
                                        + k.decodeGemm().kernel() + "; attention "
                                        + k.attention().kernel() + "; native library " + k.nativeLibrary() + "\n"),
                text(info));
    }
}
