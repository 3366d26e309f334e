package dev.scorch.jobs.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.generate.GenerateJobTest.Generated;
import dev.scorch.jobs.generate.GenerateJobTest.Spec;
import dev.scorch.jobs.score.SparkTests;
import dev.scorch.udfs.model.ExecutorModelCache;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A checkpoint whose chat template is chat_template.jinja (as newer Hugging Face checkpoints ship it), its weights
 * broadcast to the executors: the copy they load from holds the template too, so chat rows render with it.
 */
class GenerateJobChatShippingTest {
    @TempDir
    Path tmp;

    @Test
    void broadcastCopyRendersChatsWithTheJinjaTemplate() throws IOException {
        Path model = tmp.resolve("jinja-model");
        new DemoModelWriter(DemoPreset.TINY, false, true, System.nanoTime()).write(model);
        ObjectMapper json = new ObjectMapper();
        ObjectNode cfg = (ObjectNode)
                json.readTree(model.resolve("tokenizer_config.json").toFile());
        cfg.remove("chat_template");
        json.writeValue(model.resolve("tokenizer_config.json").toFile(), cfg);
        Files.writeString(
                model.resolve("chat_template.jinja"),
                "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<bot>{% endif %}");
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        int expectedPrompt = tok.encode(
                        tok.chatTemplate()
                                .orElseThrow()
                                .render(List.of(new ChatTemplate.Message("user", "Hello there")), true),
                        false)
                .length;

        Path input = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of("{\"id\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}"));
        Path cached =
                ExecutorModelCache.cacheRoot().resolve(ModelManifest.of(model).contentHash());
        try {
            Spec spec = new Spec(model, input, tmp.resolve("out"));
            spec.weights = "broadcast";
            spec.maxNewTokens = 4;
            spec.run();
            assertTrue(
                    Files.isRegularFile(cached.resolve("chat_template.jinja")),
                    "the broadcast copy in " + cached + " holds the template");
            Map<String, Generated> rows = GenerateJobTest.read(tmp.resolve("out"), "parquet");
            Generated g = rows.get("chat#0");
            assertNull(g.error(), "chat row: " + g.error());
            assertEquals(expectedPrompt, g.promptTokens(), "rendered with chat_template.jinja");
            assertEquals(4, g.completionTokens());
        } finally {
            if (Files.exists(cached)) {
                try (var walk = Files.walk(cached)) {
                    for (Path p :
                            walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                        Files.delete(p);
                    }
                }
            }
        }
    }
}
