package dev.scorch.engine.checkpoint;

import static dev.scorch.engine.checkpoint.CheckpointValidatorTest.editShardOf;
import static dev.scorch.engine.checkpoint.CheckpointValidatorTest.replace;
import static dev.scorch.engine.checkpoint.CheckpointValidatorTest.validate;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.checkpoint.CheckpointValidatorTest.Entry;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.model.ModelWeights;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Hostile and inconsistent compressed-tensors checkpoints: every INT4 triple member and FP8 scale checked against
 * config.json (dtype, shape, weight_shape's values, presence), every linear stored as the targets and ignore list say;
 * each error names the file and the tensor. A K2.5 wrapper is checked under its prefix.
 */
class CompressedTensorsValidatorTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** A routed expert's up_proj: [moe_intermediate 96, hidden 192], INT4 in the demo: packed [96, 24], scales [96, 6]. */
    static final String EXPERT = "model.layers.1.mlp.experts.3.up_proj.weight";

    static final String SHARED = "model.layers.2.mlp.shared_experts.up_proj.weight";

    @TempDir
    Path tmp;

    private Path demo(DemoModelWriter.Weights weights, boolean wrap) throws Exception {
        Path dir = tmp.resolve(weights + (wrap ? "-k25" : ""));
        new DemoModelWriter(DemoPreset.TINY, weights, true, wrap, 5).write(dir);
        return dir;
    }

    private static String only(ValidationReport r) {
        assertEquals(1, r.errors().size(), r.errors().toString());
        return r.errors().get(0);
    }

    private static void assertNames(String err, String... texts) {
        for (String t : texts) {
            assertTrue(err.contains(t), "error should name '" + t + "': " + err);
        }
    }

    private static String shard(Path dir, String tensor) {
        return Checkpoint.open(dir).info(tensor).file().toString();
    }

    private static Entry longs(String name, long... v) {
        ByteBuffer b = ByteBuffer.allocate(8 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long x : v) {
            b.putLong(x);
        }
        return new Entry(name, DType.I64, new long[] {v.length}, b.array());
    }

    @Test
    void untouchedInt4DemosAreValid() throws Exception {
        for (boolean wrap : new boolean[] {false, true}) {
            ValidationReport r = validate(demo(DemoModelWriter.Weights.INT4, wrap));
            assertTrue(r.valid(), r.errors().toString());
            assertEquals(List.of(), r.unexpected());
        }
        ValidationReport r = validate(demo(DemoModelWriter.Weights.FP8_CT, false));
        assertTrue(r.valid(), r.errors().toString());
    }

    @Test
    void scaleOfTheWrongShape() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        String scale = EXPERT + "_scale";
        editShardOf(
                dir,
                scale,
                es -> replace(es, scale, e -> new Entry(e.name(), e.dtype(), new long[] {96 * 2, 3}, e.data())));
        assertNames(only(validate(dir)), shard(dir, scale), "'" + scale + "'", "[192, 3]", "[96, 6]", "32 inputs");
    }

    @Test
    void scaleOfAnIntegerDtype() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        String scale = EXPERT + "_scale";
        editShardOf(
                dir,
                scale,
                es -> replace(es, scale, e -> new Entry(e.name(), DType.I32, new long[] {96, 3}, e.data())));
        assertNames(only(validate(dir)), "'" + scale + "'", "I32", "BF16, F16 or F32");
    }

    @Test
    void packedOfTheWrongShapeOrDtype() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        String packed = EXPERT + "_packed";
        editShardOf(
                dir,
                packed,
                es -> replace(es, packed, e -> new Entry(e.name(), e.dtype(), new long[] {48, 48}, e.data())));
        assertNames(
                only(validate(dir)), shard(dir, packed), "'" + packed + "'", "I32 [48, 48]", "expected I32 [96, 24]");
        editShardOf(
                dir,
                packed,
                es -> replace(es, packed, e -> new Entry(e.name(), DType.F32, new long[] {96, 24}, e.data())));
        assertNames(only(validate(dir)), "'" + packed + "'", "F32 [96, 24]");
    }

    @Test
    void weightShapeThatDisagreesWithTheConfig() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        String shape = EXPERT + "_shape";
        editShardOf(dir, shape, es -> replace(es, shape, e -> longs(e.name(), 96, 184)));
        assertNames(only(validate(dir)), shard(dir, shape), "'" + shape + "'", "[96, 184]", "[96, 192]");
        editShardOf(dir, shape, es -> replace(es, shape, e -> longs(e.name(), 96, 192, 1)));
        assertNames(only(validate(dir)), "'" + shape + "'", "[3]", "I64 or I32 [2]");
        editShardOf(
                dir, shape, es -> replace(es, shape, e -> new Entry(e.name(), DType.F32, new long[] {2}, new byte[8])));
        assertNames(only(validate(dir)), "'" + shape + "'", "F32");
    }

    @Test
    void aMissingMemberOfTheTriple() throws Exception {
        for (String suffix : new String[] {"_packed", "_scale", "_shape"}) {
            Path dir = tmp.resolve("missing" + suffix);
            new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.INT4, true, false, 5).write(dir);
            String gone = EXPERT + suffix;
            editShardOf(dir, gone, es -> es.removeIf(e -> e.name().equals(gone)));
            assertNames(only(validate(dir)), dir.toString(), "'" + gone + "'", "missing", "INT4 group 32", "layer 1");
        }
    }

    /** A shared expert stored INT4 where the ignore list (re:.*shared_experts.*) keeps it BF16. */
    @Test
    void int4WhereTheIgnoreListSaysPlain() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        editShardOf(dir, SHARED, es -> {
            es.removeIf(e -> e.name().equals(SHARED));
            es.add(new Entry(SHARED + "_packed", DType.I32, new long[] {96, 24}, new byte[96 * 24 * 4]));
            es.add(new Entry(SHARED + "_scale", DType.BF16, new long[] {96, 6}, new byte[96 * 6 * 2]));
            es.add(longs(SHARED + "_shape", 96, 192));
        });
        ValidationReport r = validate(dir);
        assertNames(
                only(r),
                shard(dir, SHARED + "_packed"),
                "'" + SHARED + "_packed'",
                "is INT4",
                "leaves",
                "'model.layers.2.mlp.shared_experts.up_proj' unquantized",
                "ignore list");
    }

    /** A routed expert stored BF16 where config.json quantizes it. */
    @Test
    void plainWhereTheConfigSaysInt4() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        editShardOf(dir, EXPERT + "_packed", es -> {
            es.removeIf(e -> e.name().startsWith(EXPERT));
            es.add(new Entry(EXPERT, DType.BF16, new long[] {96, 192}, new byte[96 * 192 * 2]));
        });
        ValidationReport r = validate(dir);
        assertTrue(r.errors().size() >= 1, r.errors().toString());
        assertNames(
                r.errors().get(0),
                "'" + EXPERT + "'",
                "BF16",
                "INT4 group 32 (compressed-tensors pack-quantized)",
                "'" + EXPERT + "_packed'");
    }

    @Test
    void zeroPointOrActivationOrderOfASymmetricConfig() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        editShardOf(
                dir,
                EXPERT + "_packed",
                es -> es.add(new Entry(EXPERT + "_zero_point", DType.I32, new long[] {12, 6}, new byte[12 * 6 * 4])));
        assertNames(only(validate(dir)), "'" + EXPERT + "_zero_point'", "symmetric");
    }

    /** group_size in config.json that the stored scales do not have: every quantized expert's scale is named. */
    @Test
    void groupSizeThatTheScalesDisagreeWith() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        Path cfg = dir.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        ((ObjectNode) root.get("quantization_config")
                        .get("config_groups")
                        .get("group_0")
                        .get("weights"))
                .put("group_size", 64);
        JSON.writeValue(cfg.toFile(), root);
        ValidationReport r = validate(dir);
        assertEquals(2 * 8 * 3, r.errors().size());
        assertNames(r.errors().get(0), "_scale'", "64 inputs");
    }

    /** targets that reach the embedding (an nn.Embedding, not a Linear): Scorch runs quantized linears only. */
    @Test
    void quantizedNonLinearModuleIsRefused() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        Path cfg = dir.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        ((ObjectNode) root.get("quantization_config").get("config_groups").get("group_0"))
                .putArray("targets")
                .add("Linear")
                .add("re:.*embed_tokens");
        JSON.writeValue(cfg.toFile(), root);
        assertNames(only(validate(dir)), cfg.toString(), "'model.embed_tokens'", "not a Linear");
    }

    /** An unvalidated load (ModelWeights.open) of a bad triple still fails naming the file, not with a stray exception. */
    @Test
    void unvalidatedLoadOfABadTripleNamesTheFile() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, false);
        String shape = EXPERT + "_shape";
        editShardOf(dir, shape, es -> replace(es, shape, e -> longs(e.name(), 96, 184)));
        CheckpointException e = assertThrows(
                CheckpointException.class, () -> ModelWeights.open(dir).linear(EXPERT));
        assertNames(e.getMessage(), shard(dir, EXPERT + "_packed"), EXPERT);
        editShardOf(dir, shape, es -> replace(es, shape, e2 -> longs(e2.name(), -96, 1L << 40)));
        e = assertThrows(CheckpointException.class, () -> ModelWeights.open(dir).linear(EXPERT));
        assertNames(e.getMessage(), shard(dir, shape), "'" + shape + "'", "[-96, 1099511627776]");
        CheckpointException load = assertThrows(CheckpointException.class, () -> DeepseekV3Model.load(dir));
        assertNames(load.getMessage(), "'" + shape + "'");
    }

    @Test
    void k25WrapperIsCheckedUnderItsPrefix() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.INT4, true);
        String gone = "language_model." + EXPERT + "_scale";
        String norm = "language_model.model.norm.weight";
        editShardOf(dir, gone, es -> es.removeIf(e -> e.name().equals(gone)));
        editShardOf(dir, norm, es -> {
            es.add(new Entry("model.norm.weight", DType.BF16, new long[] {192}, new byte[384])); // not under the prefix
            es.add(new Entry("audio_tower.proj.weight", DType.BF16, new long[] {2}, new byte[4]));
        });
        ValidationReport r = validate(dir);
        assertNames(only(r), "'" + gone + "'", "missing");
        assertEquals(
                List.of("model.norm.weight", "audio_tower.proj.weight"),
                r.unexpected().stream()
                        .sorted(java.util.Comparator.reverseOrder())
                        .toList());
        assertTrue(
                r.ignored().stream().anyMatch(n -> n.startsWith("vision_tower.")),
                r.ignored().toString());
        assertTrue(
                r.ignored().stream().anyMatch(n -> n.startsWith("mm_projector.")),
                r.ignored().toString());
    }

    @Test
    void fp8ScaleMissingOrMisshaped() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.FP8_CT, false);
        String weight = "model.layers.0.mlp.down_proj.weight"; // [192, 320]: scales [2, 3]
        String scale = weight + "_scale";
        editShardOf(
                dir, scale, es -> replace(es, scale, e -> new Entry(e.name(), e.dtype(), new long[] {3, 2}, e.data())));
        assertNames(only(validate(dir)), shard(dir, scale), "'" + scale + "'", "[3, 2]", "[2, 3]", "128x128");
        editShardOf(dir, scale, es -> es.removeIf(e -> e.name().equals(scale)));
        assertNames(only(validate(dir)), "'" + scale + "'", "missing");
    }

    /** kv_a_proj_with_mqa stored FP8 where the ignore list (re:.*kv_a_proj_with_mqa$) keeps it BF16, and the reverse. */
    @Test
    void fp8WhereTheIgnoreListSaysPlainAndTheReverse() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.FP8_CT, false);
        String kva = "model.layers.1.self_attn.kv_a_proj_with_mqa.weight"; // [40, 192]
        editShardOf(dir, kva, es -> {
            replace(es, kva, e -> new Entry(e.name(), DType.F8_E4M3, e.shape(), new byte[40 * 192]));
            es.add(new Entry(kva + "_scale", DType.BF16, new long[] {1, 2}, new byte[4]));
        });
        ValidationReport r = validate(dir);
        assertNames(r.errors().get(0), shard(dir, kva), "'" + kva + "'", "F8_E4M3", "unquantized", "ignore list");
        Path dir2 = tmp.resolve("reverse");
        new DemoModelWriter(DemoPreset.TINY, DemoModelWriter.Weights.FP8_CT, true, false, 5).write(dir2);
        String kvb = "model.layers.1.self_attn.kv_b_proj.weight"; // [128, 32]
        editShardOf(dir2, kvb, es -> {
            es.removeIf(e -> e.name().equals(kvb + "_scale"));
            replace(es, kvb, e -> new Entry(e.name(), DType.BF16, e.shape(), new byte[128 * 32 * 2]));
        });
        assertNames(
                only(validate(dir2)),
                "'" + kvb + "'",
                "BF16",
                "FP8 E4M3 128x128 blocks (compressed-tensors float-quantized)");
    }

    @Test
    void paddedFp8WeightsAreRefused() throws Exception {
        Path dir = demo(DemoModelWriter.Weights.FP8_CT, false);
        String weight = "model.layers.0.mlp.down_proj.weight";
        editShardOf(dir, weight, es -> es.add(longs(weight + "_shape_original", 192, 320)));
        assertNames(only(validate(dir)), "'" + weight + "_shape_original'", "padded");
    }
}
