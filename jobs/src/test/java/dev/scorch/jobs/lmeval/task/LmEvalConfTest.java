package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.jobs.lmeval.task.DocRenderer.PromptOptions;
import dev.scorch.jobs.lmeval.task.TaskRegistry.GroupNode;
import dev.scorch.jobs.lmeval.task.TaskRegistry.Node;
import dev.scorch.jobs.lmeval.task.TaskRegistry.TaskNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The example tasks in conf/evals/lm-eval/ load, find their data and build the prompts they should. */
class LmEvalConfTest {
    private static final Path CONF =
            Path.of("../conf/evals/lm-eval").toAbsolutePath().normalize();
    private static final DocTemplates T = new DocTemplates();

    private static List<Map<String, Object>> jsonl(Path p) throws Exception {
        ObjectMapper om = new ObjectMapper();
        List<Map<String, Object>> out = new ArrayList<>();
        for (String line : Files.readAllLines(p)) {
            if (!line.isBlank()) {
                out.add(om.readValue(line, new TypeReference<Map<String, Object>>() {}));
            }
        }
        return out;
    }

    private static TaskConfig task(TaskRegistry r, String name) {
        return ((TaskNode) r.resolve(name).get(0)).config();
    }

    @Test
    void everyFileIsIndexed() {
        TaskRegistry r = TaskRegistry.scan(List.of(CONF));
        assertEquals(Map.of(), r.skipped());
        GroupNode g = (GroupNode) r.resolve("scorch_demo").get(0);
        assertEquals(
                List.of("capitals_mc", "arithmetic_gen", "docs_ppl"),
                g.children().stream().map(Node::name).toList());
        assertEquals("acc", g.group().aggregateMetricList().get(0).metric());
        assertEquals(
                List.of("arithmetic_gen", "capitals_mc", "docs_ppl"),
                r.resolve("scorch_demo_tasks").stream().map(Node::name).toList());
    }

    @Test
    void capitalsIsTwoShotMultipleChoice() throws Exception {
        TaskConfig c = task(TaskRegistry.scan(List.of(CONF)), "capitals_mc");
        DataFiles files = DataFiles.resolve(c, Map.of());
        List<Map<String, Object>> train =
                jsonl(files.split(c, c.fewshotDocsSplit()).get(0));
        List<Map<String, Object>> test = jsonl(files.split(c, c.evalSplit()).get(0));
        DocRenderer r = new DocRenderer(c, test.get(0).keySet(), train, null, T);
        List<LmRequest> rq = r.requests(0, test.get(0), PromptOptions.DEFAULT);
        String context = "The following are questions about capital cities.\n\n"
                + "Question: What is the capital of Spain?\nAnswer: Madrid\n\n"
                + "Question: What is the capital of Japan?\nAnswer: Tokyo\n\n"
                + "Question: What is the capital of France?\nAnswer:";
        assertEquals(4, rq.size());
        assertEquals(context, rq.get(0).context());
        assertEquals(
                List.of(" Nice", " Lyon", " Paris", " Marseille"),
                rq.stream().map(LmRequest::continuation).toList());
        assertEquals(2, r.docToTarget(test.get(0)));
    }

    @Test
    void arithmeticGeneratesUntilANewline() throws Exception {
        TaskConfig c = task(TaskRegistry.scan(List.of(CONF)), "arithmetic_gen");
        List<Map<String, Object>> test =
                jsonl(DataFiles.resolve(c, Map.of()).split(c, "test").get(0));
        LmRequest rq = new DocRenderer(c, test.get(0).keySet(), null, null, T)
                .requests(0, test.get(0), PromptOptions.DEFAULT)
                .get(0);
        assertEquals("Q: What is 2 + 2?\nA:", rq.context());
        assertEquals(List.of("\n", "Q:"), rq.generation().until());
        assertEquals(16, rq.generation().maxGenToks());
        assertEquals("regex", c.filterList().get(0).steps().get(0).function());
        assertEquals("(-?[0-9]+)", c.filterList().get(0).steps().get(0).kwargs().get("regex_pattern"));
        assertEquals(true, c.metricList().get(0).kwargs().get("ignore_case"));
    }

    @Test
    void docsIsRollingPerplexity() throws Exception {
        TaskConfig c = task(TaskRegistry.scan(List.of(CONF)), "docs_ppl");
        List<Map<String, Object>> test =
                jsonl(DataFiles.resolve(c, Map.of()).split(c, "test").get(0));
        LmRequest rq = new DocRenderer(c, test.get(0).keySet(), null, null, T)
                .requests(0, test.get(0), PromptOptions.DEFAULT)
                .get(0);
        assertEquals(OutputType.LOGLIKELIHOOD_ROLLING, rq.type());
        assertTrue(rq.continuation().startsWith("Spark splits a large table"));
    }
}
