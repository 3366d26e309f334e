package dev.scorch.jobs.generate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.generate.GenerateJobTest.Generated;
import dev.scorch.jobs.generate.GenerateJobTest.Spec;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A model folder whose chat template overflows the stack or loops for ever on some rows: those rows come
 * back as error rows, the others are generated, and the SparkContext (here the executor too) lives on
 * (issue 24, items 6-7: a StackOverflowError in a task made Spark exit the JVM with code 50; three nested
 * range(1000) loops took 26 s a row, nine nested loops over two minutes).
 */
class GenerateJobHostileTemplateTest {
    @TempDir
    Path tmp;

    /** The demo template, plus a chain of 5,000 macros called on "deep" and three nested loops on "loop". */
    static String hostileTemplate() {
        StringBuilder t = new StringBuilder();
        for (int i = 0; i < 5000; i++) {
            t.append("{% macro m")
                    .append(i)
                    .append("() %}")
                    .append(i < 4999 ? "{{ m" + (i + 1) + "() }}" : "")
                    .append("{% endmacro %}");
        }
        return t.append("{{ bos_token }}{% for m in messages %}{% if m['content'] == 'deep' %}{{ m0() }}{% endif %}")
                .append(
                        "{% if m['content'] == 'loop' %}{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}")
                .append(
                        "{% endfor %}{% endfor %}{% endfor %}{% endif %}<{{ m['role'] }}>: {{ m['content'] }}\n{% endfor %}")
                .append("{% if add_generation_prompt %}<assistant>: {% endif %}")
                .toString();
    }

    @Test
    void rowsTheTemplateCannotRenderAreErrorRowsAndTheRestRun() throws IOException {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        ObjectMapper om = new ObjectMapper();
        ObjectNode cfg =
                (ObjectNode) om.readTree(model.resolve("tokenizer_config.json").toFile());
        cfg.put("chat_template", hostileTemplate());
        om.writeValue(model.resolve("tokenizer_config.json").toFile(), cfg);

        Path input = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"hi\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                        "{\"id\":\"deep\",\"messages\":[{\"role\":\"user\",\"content\":\"deep\"}]}",
                        "{\"id\":\"loop\",\"messages\":[{\"role\":\"user\",\"content\":\"loop\"}]}",
                        "{\"id\":\"ids\",\"token_ids\":[1,2,3]}",
                        "{\"id\":\"text\",\"prompt\":\"Once upon a time\"}"));
        Path out = tmp.resolve("out");
        Spec s = new Spec(model, input, out);
        s.maxNewTokens = 4;
        GenerateSummary summary = assertTimeoutPreemptively(Duration.ofMinutes(3), s::run);
        Map<String, Generated> rows = GenerateJobTest.read(out, "parquet");
        assertEquals(5, rows.size(), "every row comes back");
        assertEquals(2, summary.errors());
        String deep = rows.get("deep#0").error();
        assertTrue(deep != null && deep.contains("chat template overflowed the 4 MiB render stack"), deep);
        String loop = rows.get("loop#0").error();
        // Whichever limit the loop reaches first: 5 s of CPU or the allocation budget.
        assertTrue(
                loop != null
                        && (loop.contains("chat template exceeded the 5 s render time limit")
                                || loop.contains("chat template allocated more than")),
                loop);
        for (String ok : List.of("hi", "ids", "text")) {
            Generated g = rows.get(ok + "#0");
            assertNull(g.error(), ok);
            assertEquals(4, g.completionTokens(), ok);
        }
        assertFalse(SparkTests.spark().sparkContext().isStopped());
        assertEquals(5, SparkTests.spark().read().parquet(out.toString()).count());
    }
}
