package dev.scorch.engine.model;

import dev.scorch.engine.checkpoint.Checkpoint;
import dev.scorch.engine.checkpoint.CheckpointValidator;
import dev.scorch.engine.checkpoint.TensorInfo;
import dev.scorch.engine.checkpoint.ValidationReport;
import dev.scorch.engine.checkpoint.WeightLayout;
import dev.scorch.engine.config.ModelConfig;
import dev.scorch.engine.config.QuantizationConfig;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * What {@code scorch inspect} reports about a checkpoint folder: shape of the model, sizes, how each group of tensors is
 * stored, validation. Parameters count weights as the model uses them (an INT4 weight [out, in] is out × in parameters,
 * whatever its packed words and scales hold); bytes on disk are the shards' sizes.
 *
 * @param parametersByDtype parameters by storage: a dtype's header name (BF16, F32, F8_E4M3), or INT4 for packed groups
 * @param storageByGroup for each storage label (BF16, "INT4 group 32 (compressed-tensors pack-quantized)", ...), the
 *     tensor groups stored so (embedding, attention, dense MLP, router, routed experts, shared experts, lm_head), a group
 *     stored several ways marked "(part)"
 * @param multimodalIgnored a K2.5 wrapper's vision_tower.* and mm_projector.* tensors, which Scorch ignores
 */
public record ModelInfo(
        Path dir,
        ModelConfig config,
        long parameters,
        long activeParameters,
        Map<String, Long> parametersByDtype,
        Map<String, List<String>> storageByGroup,
        long bytesOnDisk,
        int shards,
        int denseLayers,
        int moeLayers,
        String tokenizer,
        ValidationReport validation,
        int multimodalIgnored) {

    public static final String INT4 = "INT4";

    public static ModelInfo of(Path dir) {
        dev.scorch.engine.checkpoint.ModelFiles.requireNoLinksOut(dir);
        ModelConfig config = ModelConfig.read(dir.resolve("config.json"));
        Checkpoint ckpt = Checkpoint.open(dir);
        ValidationReport report = CheckpointValidator.validate(config, ckpt);
        Map<String, Long> byDtype = new TreeMap<>();
        Map<String, List<String>> groupsByStorage = new LinkedHashMap<>();
        Map<String, List<String>> storageOfGroup = new LinkedHashMap<>();
        QuantizationConfig q = config.quantization();
        // The layout is listed only where the checkpoint can hold it (the validator's first check).
        for (WeightLayout.Spec s : WeightLayout.count(config) > ckpt.tensorCount()
                ? List.<WeightLayout.Spec>of()
                : WeightLayout.of(config)) {
            String name = config.checkpointName(s.name());
            String storage;
            if (ckpt.has(name)) {
                TensorInfo t = ckpt.info(name);
                byDtype.merge(t.dtype().headerName(), t.numel(), Long::sum);
                storage = t.dtype() == dev.scorch.engine.checkpoint.DType.F8_E4M3 && q != null
                        ? q.describe()
                        : t.dtype().headerName();
            } else if (ckpt.has(name + WeightLayout.PACKED) && config.isInt4()) {
                byDtype.merge(INT4, s.numel(), Long::sum);
                storage = q.describe();
            } else {
                continue;
            }
            String group = s.group();
            if (group != null) {
                List<String> seen = storageOfGroup.computeIfAbsent(group, g -> new ArrayList<>());
                if (!seen.contains(storage)) {
                    seen.add(storage);
                }
            }
        }
        for (Map.Entry<String, List<String>> e : storageOfGroup.entrySet()) {
            for (String storage : e.getValue()) {
                groupsByStorage
                        .computeIfAbsent(storage, k -> new ArrayList<>())
                        .add(e.getValue().size() > 1 ? e.getKey() + " (part)" : e.getKey());
            }
        }
        int moe = 0;
        for (int i = 0; i < config.numHiddenLayers(); i++) {
            moe += config.isMoeLayer(i) ? 1 : 0;
        }
        int multimodal = 0;
        for (String n : report.ignored()) {
            multimodal += ModelConfig.K25_IGNORED_PREFIXES.stream().anyMatch(n::startsWith) ? 1 : 0;
        }
        String tokenizer = Tokenizers.PRIMARY_FILES.stream()
                .filter(f -> Files.isRegularFile(dir.resolve(f)))
                .findFirst()
                .orElse(null);
        return new ModelInfo(
                dir,
                config,
                WeightLayout.parameters(config),
                WeightLayout.activeParameters(config),
                byDtype,
                groupsByStorage,
                ckpt.bytesOnDisk(),
                ckpt.shards().size(),
                config.numHiddenLayers() - moe,
                moe,
                tokenizer,
                report,
                multimodal);
    }

    /** The storage holding most parameters ("BF16", "F8_E4M3", "INT4", ...). */
    public String mainDtype() {
        return parametersByDtype.entrySet().stream()
                .max(Map.Entry.comparingByValue())
                .map(Map.Entry::getKey)
                .orElse("none");
    }

    /** How each tensor group is stored, in one line: "routed experts: INT4 group 32 (...); attention, ...: BF16". */
    public String storageSummary() {
        List<String> quantized = new ArrayList<>();
        List<String> plain = new ArrayList<>();
        storageByGroup.forEach((storage, groups) ->
                (storage.contains("(") ? quantized : plain).add(String.join(", ", groups) + ": " + storage));
        quantized.addAll(plain);
        return quantized.isEmpty() ? "none" : String.join("; ", quantized);
    }
}
