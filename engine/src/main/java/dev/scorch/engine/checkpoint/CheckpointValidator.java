package dev.scorch.engine.checkpoint;

import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * Checks every tensor the config declares: present, right shape, a float dtype, FP8 weights with their block scales,
 * and, under a compressed-tensors quantization_config, each linear stored as config.json says (quantized where its
 * targets and ignore list quantize it, plain where they do not) with every member of its INT4 triple of the right
 * dtype and shape. A K2.5 wrapper's tensors are looked up under its weight prefix; its vision tower and projector are
 * ignored.
 */
public final class CheckpointValidator {
    private CheckpointValidator() {}

    public static ValidationReport validate(ModelConfig config, Checkpoint ckpt) {
        // Counts first: a config may declare more tensors than any file holds, and listing them costs memory in
        // proportion.
        long declared = WeightLayout.count(config);
        if (declared > ckpt.tensorCount()) {
            return new ValidationReport(
                    List.of(ckpt.dir().resolve("config.json") + ": num_hidden_layers " + config.numHiddenLayers()
                            + " (with n_routed_experts " + config.nRoutedExperts() + ") declares " + declared
                            + " tensors; the checkpoint holds "
                            + ckpt.tensorCount()
                            + " (named by its index or shard headers), so config.json does not describe these weights"),
                    List.of(),
                    List.of());
        }
        List<String> errors = new ArrayList<>();
        Set<String> expected = new HashSet<>();
        QuantizationConfig q = config.quantization();
        boolean ct = q != null && q.compressedTensors();
        String configJson = ckpt.dir().resolve("config.json").toString();
        for (WeightLayout.Spec s : WeightLayout.of(config)) {
            String name = config.checkpointName(s.name());
            String module = config.checkpointName(s.module());
            boolean quantized = ct && q.quantizes(module, s.linearClass());
            if (quantized && !s.linearClass()) {
                errors.add(configJson + ": quantization_config quantizes '" + module
                        + "' (its targets match it, its ignore list does not), "
                        + "which is not a Linear layer; Scorch reads quantized linear weights only");
                continue;
            }
            if (quantized && q.scheme() == QuantizationConfig.Scheme.INT4_GROUP) {
                checkInt4(ckpt, q, s, name, module, expected, errors);
                continue;
            }
            expected.add(name);
            if (ct && ckpt.has(name + WeightLayout.PACKED)) {
                expected.add(name + WeightLayout.PACKED);
                errors.add(ckpt.info(name + WeightLayout.PACKED).file() + ": tensor '" + name + WeightLayout.PACKED
                        + "' is INT4 but " + configJson + " quantization_config leaves '" + module + "' unquantized "
                        + why(q, module, s.linearClass()));
                continue;
            }
            if (!ckpt.has(name)) {
                errors.add(ckpt.dir() + ": tensor '" + name + "' is missing"
                        + (s.layer() >= 0
                                ? " (layer " + s.layer() + " is declared by num_hidden_layers "
                                        + config.numHiddenLayers() + ")"
                                : ""));
                continue;
            }
            TensorInfo t = ckpt.info(name);
            if (!t.hasShape(s.shape())) {
                errors.add(t.file() + ": tensor '" + name + "' has shape " + t.shapeString() + ", config.json implies "
                        + Arrays.toString(s.shape()));
                continue;
            }
            if (!t.dtype().isFloating()) {
                errors.add(t.file() + ": tensor '" + name + "' has integer dtype " + t.dtype());
                continue;
            }
            if (t.dtype() != DType.F8_E4M3) {
                if (quantized) {
                    errors.add(t.file() + ": tensor '" + name + "' is " + t.dtype() + " but " + configJson
                            + " quantization_config quantizes '" + module + "' as " + q.describe()
                            + ": expected F8_E4M3 with '" + name + WeightLayout.SCALE + "'");
                }
                continue;
            }
            if (s.kind() != WeightLayout.Kind.LINEAR) {
                errors.add(t.file() + ": tensor '" + name + "' is F8_E4M3 but only linear weights may be");
                continue;
            }
            if (ct && !quantized) {
                errors.add(t.file() + ": tensor '" + name + "' is F8_E4M3 but " + configJson
                        + " quantization_config leaves '" + module + "' unquantized " + why(q, module, true));
                continue;
            }
            if (q == null) {
                errors.add(t.file() + ": tensor '" + name + "' is F8_E4M3 but config.json has no quantization_config");
            } else if (q.scheme() != QuantizationConfig.Scheme.FP8_BLOCK) {
                errors.add(t.file() + ": tensor '" + name + "' is F8_E4M3 but config.json quantization_config declares "
                        + q.describe());
                continue;
            }
            int br = q == null ? 128 : q.blockRows();
            int bc = q == null ? 128 : q.blockCols();
            String scaleName = name + (q == null ? "_scale_inv" : q.fp8ScaleSuffix());
            expected.add(scaleName);
            long[] scaleShape = {ceilDiv(s.shape()[0], br), ceilDiv(s.shape()[1], bc)};
            if (!ckpt.has(scaleName)) {
                errors.add(t.file() + ": tensor '" + scaleName + "' (block scales of an F8_E4M3 weight) is missing");
            } else {
                TensorInfo sc = ckpt.info(scaleName);
                if (!sc.hasShape(scaleShape)) {
                    errors.add(sc.file() + ": tensor '" + scaleName + "' has shape " + sc.shapeString() + ", expected "
                            + Arrays.toString(scaleShape) + " for " + br + "x" + bc + " blocks");
                } else if (!sc.dtype().isFloating() || sc.dtype() == DType.F8_E4M3) {
                    errors.add(sc.file() + ": tensor '" + scaleName + "' has dtype " + sc.dtype() + ", expected F32");
                }
            }
            if (ct && ckpt.has(name + "_shape_original")) {
                expected.add(name + "_shape_original");
                errors.add(ckpt.info(name + "_shape_original").file() + ": tensor '" + name + "_shape_original' marks '"
                        + name + "' as padded to whole blocks; padded FP8 block weights are not supported");
            }
        }
        List<String> ignored = new ArrayList<>();
        List<String> unexpected = new ArrayList<>();
        String prefix = config.weightPrefix();
        for (String name : ckpt.names()) {
            if (expected.contains(name)) {
                continue;
            }
            String text = name.startsWith(prefix) ? name.substring(prefix.length()) : null;
            if (text == null
                    && config.isWrapped()
                    && ModelConfig.K25_IGNORED_PREFIXES.stream().anyMatch(name::startsWith)) {
                ignored.add(name); // the wrapper's vision tower and projector: Scorch runs the text model only
            } else if (text != null && WeightLayout.ignored(text, config)) {
                ignored.add(name);
            } else if (name.endsWith("_scale_inv")
                    && ckpt.has(name.substring(0, name.length() - "_scale_inv".length()))) {
                ignored.add(name); // scale of a weight that is not FP8: unused
            } else {
                unexpected.add(name);
            }
        }
        return new ValidationReport(List.copyOf(errors), List.copyOf(ignored), List.copyOf(unexpected));
    }

    /** X.weight as compressed-tensors' INT4 triple: weight_packed I32 [out, ceil(in / 8)], weight_scale [out, ceil(in / g)], weight_shape [2]. */
    private static void checkInt4(
            Checkpoint ckpt,
            QuantizationConfig q,
            WeightLayout.Spec s,
            String name,
            String module,
            Set<String> expected,
            List<String> errors) {
        long out = s.shape()[0];
        long in = s.shape()[1];
        int g = q.groupSize();
        String packed = name + WeightLayout.PACKED;
        String scale = name + WeightLayout.SCALE;
        String shape = name + WeightLayout.SHAPE;
        expected.addAll(List.of(packed, scale, shape));
        String what = "quantization_config quantizes '" + module + "' as " + q.describe();
        if (ckpt.has(name)) {
            expected.add(name);
            TensorInfo t = ckpt.info(name);
            errors.add(t.file() + ": tensor '" + name + "' is stored as " + t.dtype() + " but config.json " + what
                    + " (targets match it, ignore does not): expected '" + packed + "', '" + scale + "' and '" + shape
                    + "'");
            return;
        }
        for (String extra : new String[] {name + "_zero_point", name + "_g_idx"}) {
            if (ckpt.has(extra)) {
                expected.add(extra);
                errors.add(ckpt.info(extra).file() + ": tensor '" + extra
                        + "' is present but config.json declares symmetric INT4 groups "
                        + "in column order (no zero points, no activation order)");
            }
        }
        for (String member : new String[] {packed, scale, shape}) {
            if (!ckpt.has(member)) {
                errors.add(ckpt.dir() + ": tensor '" + member + "' is missing: config.json " + what + ", stored as '"
                        + packed + "', '" + scale + "' and '" + shape + "'"
                        + (s.layer() >= 0 ? " (layer " + s.layer() + ")" : ""));
            }
        }
        if (ckpt.has(packed)) {
            TensorInfo p = ckpt.info(packed);
            long[] want = {out, ceilDiv(in, 8)};
            if (p.dtype() != DType.I32 || !p.hasShape(want)) {
                errors.add(p.file() + ": tensor '" + packed + "' is " + p.dtype() + " " + p.shapeString()
                        + ", expected I32 " + Arrays.toString(want) + " (eight 4-bit weights a word for a [" + out
                        + ", " + in + "] weight)");
            }
        }
        if (ckpt.has(scale)) {
            TensorInfo sc = ckpt.info(scale);
            long[] want = {out, ceilDiv(in, g)};
            if (!sc.dtype().isFloating() || sc.dtype() == DType.F8_E4M3 || !sc.hasShape(want)) {
                errors.add(sc.file() + ": tensor '" + scale + "' is " + sc.dtype() + " " + sc.shapeString()
                        + ", expected BF16, F16 or F32 " + Arrays.toString(want) + " (one scale per " + g
                        + " inputs, group_size in config.json)");
            }
        }
        if (ckpt.has(shape)) {
            TensorInfo sh = ckpt.info(shape);
            if (sh.dtype().isFloating() || !sh.hasShape(2)) {
                errors.add(sh.file() + ": tensor '" + shape + "' is " + sh.dtype() + " " + sh.shapeString()
                        + ", expected I64 or I32 [2]");
            } else {
                long[] v = ckpt.tensor(shape).toLongArray();
                if (v[0] != out || v[1] != in) {
                    errors.add(sh.file() + ": tensor '" + shape + "' says " + Arrays.toString(v)
                            + ", config.json implies [" + out + ", " + in + "]");
                }
            }
        }
    }

    /** Why a compressed-tensors config leaves a module unquantized, for messages. */
    private static String why(QuantizationConfig q, String module, boolean linear) {
        return q.targets().matches(module, linear) ? "(its ignore list matches it)" : "(its targets do not match it)";
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }
}
