package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.config.ModelConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The counts and sums WeightLayout computes without listing the tensors agree with the list, config by config. */
class WeightLayoutTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private ModelConfig config(String name, String field, Object value) throws Exception {
        Path src = Path.of(WeightLayoutTest.class
                .getResource("/configs/" + name + "/config.json")
                .toURI());
        ObjectNode root = (ObjectNode) JSON.readTree(src.toFile());
        if (field != null) {
            root.set(field, JSON.valueToTree(value));
        }
        Path f = Files.createTempDirectory(tmp, name).resolve("config.json");
        JSON.writeValue(f.toFile(), root);
        return ModelConfig.read(f);
    }

    @Test
    void countAndSumsMatchTheList() throws Exception {
        List<ModelConfig> configs = List.of(
                config("kimi-k2-instruct", null, null),
                config("deepseek-v3", null, null),
                config("deepseek-v3", "q_lora_rank", null),
                config("deepseek-v3", "n_shared_experts", 0),
                config("deepseek-v3", "moe_layer_freq", 3),
                config("kimi-k2-instruct", "n_routed_experts", 0));
        for (ModelConfig c : configs) {
            List<WeightLayout.Spec> specs = WeightLayout.of(c);
            assertEquals(specs.size(), WeightLayout.count(c));
            long total = 0;
            long routed = 0;
            for (WeightLayout.Spec s : specs) {
                total += s.numel();
                routed += s.routedExpert() ? s.numel() : 0;
            }
            assertEquals(total, WeightLayout.parameters(c));
            long active = c.nRoutedExperts() == 0
                    ? total
                    : total - routed + routed / c.nRoutedExperts() * c.numExpertsPerTok();
            assertEquals(active, WeightLayout.activeParameters(c));
        }
    }
}
