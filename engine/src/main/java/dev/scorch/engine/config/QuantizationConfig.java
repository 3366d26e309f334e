package dev.scorch.engine.config;

import java.util.List;

/**
 * config.json {@code quantization_config}, in the two families Scorch runs:
 * <ul>
 *   <li>{@code quant_method: fp8} (DeepSeek-V3/R1, Kimi-K2-Instruct): F8_E4M3 linears, each times one
 *       {@code weight_scale_inv} per {@code weight_block_size} block; which linears are FP8 is the files' dtypes' say.
 *   <li>{@code quant_method: compressed-tensors} with one config group: {@code format: pack-quantized}, weights
 *       {@code {num_bits: 4, type: int, symmetric: true, strategy: group, group_size: g}} (Kimi-K2-Thinking, K2.5, K2.6:
 *       X.weight_packed, X.weight_scale, X.weight_shape), or {@code float-quantized} (or its alias
 *       {@code naive-quantized}) with weights {@code {num_bits: 8, type: float, strategy: block, block_structure: [r, c]}}
 *       (X.weight in F8_E4M3 times X.weight_scale per block). The modules quantized are those the group's
 *       {@code targets} match and {@code ignore} does not ({@link ModuleMatcher}).
 * </ul>
 * Everything else (other methods, formats, bit widths, strategies, asymmetric or activation-ordered weights, static
 * activation scales, sparsity, quantized KV caches, several config groups) is refused naming the file, the field and
 * what Scorch reads. Activations stay in fp32 whatever {@code input_activations} says (dynamic FP8 activations of an
 * FP8 block export are not emulated, as DeepSeek's {@code activation_scheme: dynamic} is not).
 *
 * @param format compressed-tensors' format ({@code pack-quantized}, ...); "fp8" for DeepSeek's
 * @param blockRows FP8: rows per scale block (0 for INT4)
 * @param blockCols FP8: input columns per scale block (0 for INT4)
 * @param groupSize INT4: inputs per scale (0 for FP8)
 * @param targets compressed-tensors: the modules the group quantizes, before {@code ignore} (null for fp8)
 * @param ignore compressed-tensors: the modules left unquantized (null for fp8)
 */
public record QuantizationConfig(
        String quantMethod,
        Scheme scheme,
        String format,
        String activationScheme,
        int blockRows,
        int blockCols,
        int groupSize,
        ModuleMatcher targets,
        ModuleMatcher ignore) {

    /** How a quantized linear is stored. */
    public enum Scheme {
        /** F8_E4M3 codes times one fp32/bf16 scale per blockRows × blockCols block. */
        FP8_BLOCK,
        /** compressed-tensors' symmetric INT4 in int32 words, one scale per groupSize inputs of a row. */
        INT4_GROUP
    }

    public static final String FP8 = "fp8";
    public static final String COMPRESSED_TENSORS = "compressed-tensors";
    public static final String PACK_QUANTIZED = "pack-quantized";
    public static final String FLOAT_QUANTIZED = "float-quantized";
    public static final String NAIVE_QUANTIZED = "naive-quantized";

    /** Block sides beyond any real checkpoint's (128). */
    public static final int MAX_BLOCK = 1 << 16;
    /** Group sizes beyond any real checkpoint's (32, 64, 128). */
    public static final int MAX_GROUP = 1 << 16;

    /** What Scorch reads, for refusals. */
    static final String SUPPORTED =
            "Scorch reads quant_method \"fp8\" (DeepSeek's block-scaled F8_E4M3 with weight_scale_inv) and "
                    + "\"compressed-tensors\" with format \"pack-quantized\" (INT4, symmetric, strategy group: weight_packed + weight_scale + "
                    + "weight_shape) or \"float-quantized\" (FP8 E4M3, strategy block: weight + weight_scale)";

    public boolean compressedTensors() {
        return COMPRESSED_TENSORS.equals(quantMethod);
    }

    /** The fp8 element format ("e4m3") for FP8 schemes, "int4" for INT4. */
    public String fmt() {
        return scheme == Scheme.FP8_BLOCK ? "e4m3" : "int4";
    }

    /** The suffix of an FP8 weight's block-scale tensor: DeepSeek's {@code _scale_inv}, compressed-tensors' {@code _scale}. */
    public String fp8ScaleSuffix() {
        return compressedTensors() ? "_scale" : "_scale_inv";
    }

    /**
     * compressed-tensors: whether the module named {@code module} (as the checkpoint names it, without {@code .weight}) is
     * quantized: its group's targets match it (by name, or {@code Linear} by class where {@code linear}) and ignore does not.
     * Always false for DeepSeek's fp8, whose FP8 linears are known by their dtype.
     */
    public boolean quantizes(String module, boolean linear) {
        return compressedTensors() && targets.matches(module, linear) && !ignore.matches(module, linear);
    }

    /** A label for inspect and errors: "INT4 group 32 (compressed-tensors pack-quantized)", "FP8 E4M3 128x128 blocks (...)". */
    public String describe() {
        String what = scheme == Scheme.INT4_GROUP
                ? "INT4 group " + groupSize
                : "FP8 E4M3 " + blockRows + "x" + blockCols + " blocks";
        return what + (compressedTensors() ? " (compressed-tensors " + format + ")" : " (quant_method fp8)");
    }

    static QuantizationConfig parse(JsonFields f) {
        String method = f.optString("quant_method", null);
        if (FP8.equals(method)) {
            return parseFp8(f);
        }
        if (COMPRESSED_TENSORS.equals(method)) {
            return parseCompressedTensors(f);
        }
        throw f.error("quant_method", "is " + f.text("quant_method") + "; " + SUPPORTED);
    }

    private static QuantizationConfig parseFp8(JsonFields f) {
        String fmt = f.optString("fmt", "e4m3");
        if (!fmt.equals("e4m3")) {
            throw f.error("fmt", "is " + fmt + "; only e4m3 is supported");
        }
        List<Integer> block = f.intOrIntList("weight_block_size");
        if (block.size() != 2
                || block.get(0) <= 0
                || block.get(1) <= 0
                || block.get(0) > MAX_BLOCK
                || block.get(1) > MAX_BLOCK) {
            throw f.error("weight_block_size", "must be two integers in [1, " + MAX_BLOCK + "], got " + block);
        }
        return new QuantizationConfig(
                FP8,
                Scheme.FP8_BLOCK,
                FP8,
                f.optString("activation_scheme", "dynamic"),
                block.get(0),
                block.get(1),
                0,
                null,
                null);
    }

    private static QuantizationConfig parseCompressedTensors(JsonFields f) {
        String status = f.optString("quantization_status", "compressed");
        if (!status.equals("compressed")) {
            throw f.error(
                    "quantization_status",
                    "is \"" + status + "\"; Scorch reads checkpoints whose weights are stored compressed "
                            + "(\"compressed\")");
        }
        for (String unsupported : new String[] {"sparsity_config", "kv_cache_scheme", "transform_config"}) {
            if (f.has(unsupported)) {
                throw f.error(
                        unsupported,
                        "is " + f.text(unsupported)
                                + "; Scorch reads compressed-tensors checkpoints without it (null)");
            }
        }
        JsonFields groups = f.object("config_groups");
        if (groups == null) {
            throw f.error("config_groups", "is required for quant_method compressed-tensors");
        }
        List<String> names = groups.fieldNames();
        if (names.size() != 1) {
            throw f.error("config_groups", "has " + names.size() + " groups " + names + "; Scorch reads exactly one");
        }
        String groupName = names.get(0);
        JsonFields g = groups.object(groupName);
        if (g == null) {
            throw groups.error(groupName, "must be an object");
        }
        String format = g.optString("format", f.optString("format", null));
        if (format == null) {
            throw f.error("format", "is required for quant_method compressed-tensors; " + SUPPORTED);
        }
        boolean pack = format.equals(PACK_QUANTIZED);
        boolean fp8 = format.equals(FLOAT_QUANTIZED) || format.equals(NAIVE_QUANTIZED);
        if (!pack && !fp8) {
            throw (g.has("format") ? g : f).error("format", "is \"" + format + "\"; " + SUPPORTED);
        }
        if (g.has("output_activations")) {
            throw g.error(
                    "output_activations",
                    "is " + g.text("output_activations") + "; Scorch reads weight-only schemes (null)");
        }
        String activations = "none";
        JsonFields in = g.object("input_activations");
        if (in != null) {
            if (!in.optBool("dynamic", false)) {
                throw g.error(
                        "input_activations",
                        "has static scales (dynamic false); Scorch reads weight-only schemes and dynamic "
                                + "activation quantization (which it does not emulate: activations stay fp32)");
            }
            activations = "dynamic";
        }
        JsonFields w = g.object("weights");
        if (w == null) {
            throw g.error("weights", "is required (the weights' quantization args)");
        }
        List<String> targetList = g.stringList("targets");
        if (targetList.isEmpty()) {
            throw g.error("targets", "must list the modules the group quantizes (Kimi's: [\"Linear\"])");
        }
        int bits = w.intIn("num_bits", 1, 64);
        String type = w.optString("type", "int");
        boolean symmetric = w.optBool("symmetric", true);
        if (w.has("dynamic") && !w.text("dynamic").equals("false")) {
            throw w.error(
                    "dynamic", "is " + w.text("dynamic") + "; Scorch reads weights quantized ahead of time (false)");
        }
        String actorder = actorder(w);
        if (actorder != null && !actorder.equals("weight") && !actorder.equals("static")) {
            throw w.error(
                    "actorder",
                    "is " + w.text("actorder") + "; activation-ordered groups (weight_g_idx) are not supported "
                            + "(null, or \"weight\" which leaves the stored format unchanged)");
        }
        Integer groupSize = w.has("group_size") ? w.intIn("group_size", -1, MAX_GROUP) : null;
        String strategy = w.optString(
                "strategy",
                groupSize == null ? "tensor" : groupSize > 0 ? "group" : groupSize == -1 ? "channel" : null);
        if (strategy == null) {
            throw w.error(
                    "group_size", "is " + groupSize + "; must be positive (strategy group) or -1 (strategy channel)");
        }
        ModuleMatcher targets = ModuleMatcher.parse(g, "targets", "config_groups." + groupName + ".targets");
        ModuleMatcher ignore = ModuleMatcher.parse(f, "ignore", "ignore");
        String scheme = (symmetric ? "symmetric" : "asymmetric") + " " + type + bits + " strategy " + strategy;
        if (pack) {
            if (!type.equals("int") || bits != 4) {
                throw w.error(
                        !type.equals("int") ? "type" : "num_bits",
                        "is " + (!type.equals("int") ? type : bits) + " (" + scheme
                                + "); pack-quantized is read with INT4 weights only (type int, num_bits 4); "
                                + SUPPORTED);
            }
            if (!symmetric) {
                throw w.error(
                        "symmetric",
                        "is false: asymmetric INT4 (" + scheme + ", weight_zero_point) is not supported; " + SUPPORTED);
            }
            if (!strategy.equals("group")) {
                throw w.error(
                        "strategy",
                        "is \"" + strategy + "\" (" + scheme
                                + "); pack-quantized INT4 is read with strategy group only");
            }
            if (groupSize == null || groupSize <= 0) {
                throw w.error(
                        "group_size",
                        "must be an integer in [1, " + MAX_GROUP + "] for strategy group, got " + w.text("group_size"));
            }
            if (w.has("block_structure")) {
                throw w.error("block_structure", "is " + w.text("block_structure") + "; strategy group takes none");
            }
            return new QuantizationConfig(
                    COMPRESSED_TENSORS, Scheme.INT4_GROUP, format, activations, 0, 0, groupSize, targets, ignore);
        }
        if (!type.equals("float") || bits != 8) {
            throw w.error(
                    !type.equals("float") ? "type" : "num_bits",
                    "is " + (!type.equals("float") ? type : bits) + " (" + scheme + "); " + format
                            + " is read with FP8 E4M3 weights only (type float, num_bits 8); " + SUPPORTED);
        }
        if (!symmetric) {
            throw w.error("symmetric", "is false (" + scheme + "); FP8 weights are read symmetric only");
        }
        if (!strategy.equals("block")) {
            throw w.error(
                    "strategy",
                    "is \"" + strategy + "\" (" + scheme + "); FP8 weights are read with strategy block "
                            + "(block_structure [rows, cols]) only");
        }
        int[] block = blockStructure(w);
        return new QuantizationConfig(
                COMPRESSED_TENSORS, Scheme.FP8_BLOCK, format, activations, block[0], block[1], 0, targets, ignore);
    }

    /** actorder as written: null, a string, or a boolean (true means "group", as compressed-tensors reads it). */
    private static String actorder(JsonFields w) {
        if (!w.has("actorder")) {
            return null;
        }
        String text = w.text("actorder");
        if (text.equals("false")) {
            return null;
        }
        if (text.equals("true")) {
            return "group";
        }
        return w.optString("actorder", null).toLowerCase(java.util.Locale.ROOT);
    }

    /** block_structure: [rows, cols], or the older "RxC" string compressed-tensors also reads. */
    private static int[] blockStructure(JsonFields w) {
        if (!w.has("block_structure")) {
            throw w.error("block_structure", "is required for strategy block ([rows, cols], e.g. [128, 128])");
        }
        String text = w.text("block_structure");
        List<Integer> b;
        if (text.startsWith("\"")) {
            String[] parts = w.optString("block_structure", "").split("x", -1);
            try {
                b = parts.length == 2
                        ? List.of(Integer.parseInt(parts[0].trim()), Integer.parseInt(parts[1].trim()))
                        : List.of();
            } catch (NumberFormatException e) {
                b = List.of();
            }
        } else {
            b = w.intOrIntList("block_structure");
        }
        if (b.size() != 2 || b.get(0) < 1 || b.get(1) < 1 || b.get(0) > MAX_BLOCK || b.get(1) > MAX_BLOCK) {
            throw w.error("block_structure", "must be two integers in [1, " + MAX_BLOCK + "], got " + text);
        }
        return new int[] {b.get(0), b.get(1)};
    }
}
