package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TaskConfigTest {
    @TempDir
    Path dir;

    private TaskConfig read(String yaml) throws Exception {
        Path p = dir.resolve("t.yaml");
        Files.writeString(p, yaml);
        return TaskConfig.from(TaskYaml.load(p), p);
    }

    private String refusal(String yaml) {
        return assertThrows(IllegalArgumentException.class, () -> read(yaml)).getMessage();
    }

    @Test
    void lmEvalDefaults() throws Exception {
        TaskConfig c = read("task: t\ndataset_path: json\ndoc_to_text: q\ndoc_to_target: a\n");
        assertEquals(OutputType.GENERATE_UNTIL, c.outputType());
        assertEquals(" ", c.targetDelimiter());
        assertEquals("\n\n", c.fewshotDelimiter());
        assertEquals("", c.description());
        assertEquals(1, c.repeats());
        assertNull(c.numFewshot());
        // generate_until without generation_kwargs: until the fewshot delimiter, 256 tokens, greedy
        assertEquals(List.of("\n\n"), c.generationKwargs().until());
        assertEquals(256, c.generationKwargs().maxGenToks());
        assertEquals(false, c.generationKwargs().doSample());
        assertEquals(0.0, c.generationKwargs().temperature());
        assertEquals(
                List.of("exact_match"),
                c.metricList().stream().map(TaskConfig.MetricSpec::metric).toList());
        assertEquals("none", c.filterList().get(0).name());
        assertEquals("take_first", c.filterList().get(0).steps().get(0).function());
        assertEquals("default", c.fewshotConfig().sampler());
    }

    @Test
    void defaultMetricsFollowTheOutputType() throws Exception {
        assertEquals(
                List.of("acc", "acc_norm"),
                read("task: t\noutput_type: multiple_choice\n").metricList().stream()
                        .map(TaskConfig.MetricSpec::metric)
                        .toList());
        assertEquals(
                List.of("word_perplexity", "byte_perplexity", "bits_per_byte"),
                read("task: t\noutput_type: loglikelihood_rolling\n").metricList().stream()
                        .map(TaskConfig.MetricSpec::metric)
                        .toList());
        assertNull(read("task: t\noutput_type: loglikelihood\n").generationKwargs());
    }

    @Test
    void fieldsAsWritten() throws Exception {
        TaskConfig c = read("""
                task: t
                task_alias: T
                tag: [a, b]
                dataset_path: json
                dataset_name: main
                dataset_kwargs: {data_files: {test: x.jsonl}}
                training_split: train
                validation_split: dev
                test_split: test
                fewshot_split: train
                output_type: generate_until
                doc_to_text: "Q: {{q}}"
                doc_to_target: 2
                target_delimiter: ""
                fewshot_delimiter: "\\n"
                description: "D\\n"
                num_fewshot: 3
                fewshot_config: {sampler: first_n}
                metric_list:
                  - metric: exact_match
                    aggregation: mean
                    higher_is_better: true
                    ignore_case: true
                    ignore_punctuation: false
                filter_list:
                  - name: strict
                    filter: [{function: regex, regex_pattern: "#### (\\\\d+)"}, {function: take_first}]
                generation_kwargs: {until: "Q:", max_gen_toks: 32, do_sample: false, temperature: 0}
                repeats: 2
                should_decontaminate: true
                doc_to_decontamination_query: q
                metadata: {version: 3.0}
                """);
        assertEquals("T", c.taskAlias());
        assertEquals(List.of("a", "b"), c.tags());
        assertEquals(Map.of("data_files", Map.of("test", "x.jsonl")), c.datasetKwargs());
        assertEquals("dev", c.validationSplit());
        assertEquals(2, c.docToTarget());
        assertEquals("", c.targetDelimiter());
        assertEquals("\n", c.fewshotDelimiter());
        assertEquals(3, c.numFewshot());
        assertEquals("first_n", c.fewshotConfig().sampler());
        assertEquals("train", c.fewshotConfig().split());
        // fewshot_config inherits the task's fields it does not set
        assertEquals("Q: {{q}}", c.fewshotConfig().docToText());
        assertEquals("\n", c.fewshotConfig().fewshotDelimiter());
        assertEquals("", c.fewshotConfig().targetDelimiter());
        TaskConfig.MetricSpec m = c.metricList().get(0);
        assertEquals("mean", m.aggregation());
        assertEquals(true, m.higherIsBetter());
        assertEquals(Map.of("ignore_case", true, "ignore_punctuation", false), m.kwargs());
        assertEquals("regex", c.filterList().get(0).steps().get(0).function());
        assertEquals(
                Map.of("regex_pattern", "#### (\\d+)"),
                c.filterList().get(0).steps().get(0).kwargs());
        assertEquals(List.of("Q:"), c.generationKwargs().until()); // a string until becomes a list
        assertEquals(32, c.generationKwargs().maxGenToks());
        assertEquals(0.0, c.generationKwargs().temperature());
        assertEquals(0.0, c.generationKwargs().all().get("temperature")); // made a float, as lm-eval does
        assertEquals(2, c.repeats());
        assertEquals(3.0, c.version());
        assertEquals("test", c.evalSplit());
        assertEquals("train", c.fewshotDocsSplit());
    }

    @Test
    void generationKwargsWithoutUntilStopAtTheFewshotDelimiter() throws Exception {
        TaskConfig c = read("task: t\nfewshot_delimiter: \"\\n\"\ngeneration_kwargs: {max_gen_toks: 5, top_p: 0.9}\n");
        assertEquals(List.of("\n"), c.generationKwargs().until());
        assertEquals(0.9, c.generationKwargs().all().get("top_p"));
    }

    @Test
    void fewshotConfigOverridesTheTasksFields() throws Exception {
        TaskConfig c = read("""
                task: t
                doc_to_text: q
                target_delimiter: ' '
                fewshot_config:
                  sampler: first_n
                  doc_to_text: shot_q
                  target_delimiter: ': '
                  samples: [{q: a, t: b}]
                """);
        assertEquals("shot_q", c.fewshotConfig().docToText());
        assertEquals(": ", c.fewshotConfig().targetDelimiter());
        assertEquals(" ", c.targetDelimiter());
        assertNull(c.fewshotDocsSplit()); // samples are the pool
        assertEquals(List.of(Map.of("q", "a", "t", "b")), c.fewshotConfig().samples());
    }

    @Test
    void fewshotDocsFallBackTrainingValidationTest() throws Exception {
        assertEquals(
                "dev",
                read("task: t\nvalidation_split: dev\ntest_split: test\n").fewshotDocsSplit());
        assertEquals("test", read("task: t\ntest_split: test\n").fewshotDocsSplit());
        assertEquals("dev", read("task: t\nvalidation_split: dev\n").evalSplit());
    }

    @Test
    void unknownOutputTypeIsRefusedByName() {
        String m = refusal("task: t\noutput_type: generate_json\n");
        assertTrue(m.contains("'generate_json'"), m);
        assertTrue(m.contains("output_type"), m);
        assertTrue(m.contains("lm-eval task 't'"), m);
    }

    @Test
    void unknownFieldsAreRefusedByName() {
        String m = refusal("task: t\ndoc_to_txt: q\n");
        assertTrue(m.contains("'doc_to_txt'"), m);
        assertTrue(m.contains(dir.resolve("t.yaml").toString()), m);
        assertTrue(refusal("task: t\nfewshot_config: {smapler: x}\n").contains("fewshot_config.smapler"));
    }

    @Test
    void pythonHooksAreRefusedNamingTaskAndHook() {
        String m = refusal("task: gsm\nprocess_docs: !function utils.process_docs\n");
        assertTrue(m.contains("lm-eval task 'gsm'"), m);
        assertTrue(m.contains("process_docs"), m);
        assertTrue(m.contains("utils.process_docs"), m);
        m = refusal("task: t\nprocess_results: !function utils.score\n");
        assertTrue(m.contains("process_results") && m.contains("utils.score"), m);
        m = refusal("task: t\nmetric_list: [{metric: !function m.f, aggregation: mean}]\n");
        assertTrue(m.contains("metric_list[0].metric") && m.contains("m.f"), m);
        m = refusal("task: t\nfilter_list: [{name: x, filter: [{function: custom, filter_fn: !function f.g}]}]\n");
        assertTrue(m.contains("filter_list[0].filter[0].filter_fn"), m);
        m = refusal("task: t\ndoc_to_text: !function utils.text\n");
        assertTrue(m.contains("doc_to_text") && m.contains("utils.text"), m);
        assertTrue(refusal("task: t\nclass: !function m.Task\n").contains("Python"));
        assertTrue(refusal("task: t\nuse_prompt: promptsource:x\n").contains("use_prompt"));
        assertTrue(refusal("task: t\ndoc_to_image: img\n").contains("multimodal"));
        assertTrue(refusal("task: t\nunsafe_code: true\n").contains("unsafe_code"));
        assertTrue(refusal("task: t\nmetric_list: [{metric: bleu, hf_evaluate: true}]\n")
                .contains("hf_evaluate"));
    }

    @Test
    void badValuesNameTheField() {
        assertTrue(refusal("task: t\nnum_fewshot: many\n").contains("'num_fewshot' must be an integer"));
        assertTrue(refusal("task: t\nnum_fewshot: -1\n").contains("num_fewshot"));
        assertTrue(refusal("task: t\nmetric_list: [{aggregation: mean}]\n").contains("metric_list[0].metric"));
        assertTrue(refusal("task: t\ngeneration_kwargs: {do_sample: maybe}\n").contains("generation_kwargs.do_sample"));
        assertTrue(refusal("dataset_path: json\n").contains("'task'"));
    }
}
