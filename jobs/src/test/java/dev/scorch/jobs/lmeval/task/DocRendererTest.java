package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.tokenizer.ChatTemplate.Message;
import dev.scorch.jobs.lmeval.FewShotSampler;
import dev.scorch.jobs.lmeval.task.DocRenderer.PromptOptions;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class DocRendererTest {
    @TempDir
    Path dir;

    private static final DocTemplates T = new DocTemplates();

    private TaskConfig task(String yaml) throws Exception {
        Path p = dir.resolve("t.yaml");
        Files.writeString(p, yaml);
        return TaskConfig.from(TaskYaml.load(p), p);
    }

    private static Map<String, Object> doc(Object... kv) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static final List<String> QA = List.of("question", "choices", "answer");

    private static final List<Map<String, Object>> TRAIN = List.of(
            doc("question", "1+1?", "choices", List.of("2", "3"), "answer", 0),
            doc("question", "2+2?", "choices", List.of("5", "4"), "answer", 1),
            doc("question", "3+3?", "choices", List.of("6", "7"), "answer", 0));

    private static final Map<String, Object> DOC = doc("question", "4+4?", "choices", List.of("9", "8"), "answer", 1);

    private static final String MC = """
            task: mc
            output_type: multiple_choice
            test_split: test
            training_split: train
            doc_to_text: "Q: {{question}}\\nA:"
            doc_to_target: answer
            doc_to_choice: choices
            """;

    @Test
    void aFieldNamingAColumnReadsItAnythingElseIsATemplate() throws Exception {
        DocRenderer r = new DocRenderer(task(MC), QA, TRAIN, null, T);
        assertEquals("Q: 4+4?\nA:", r.docToText(DOC)); // not a column: rendered
        assertEquals(1, r.docToTarget(DOC)); // a column: its value as is
        assertEquals(List.of("9", "8"), r.docToChoice(DOC));
        // the same string is a column only when the data has that column
        DocRenderer noColumn = new DocRenderer(
                task(MC.replace("doc_to_target: answer", "doc_to_target: answer_x")), QA, TRAIN, null, T);
        assertEquals("answer_x", noColumn.docToTarget(DOC)); // a template without tags renders to itself
    }

    @Test
    void renderedDigitsAreAnIndexOnlyWithChoices() throws Exception {
        DocRenderer withChoices = new DocRenderer(
                task(MC.replace("doc_to_target: answer", "doc_to_target: '{{answer}}'")), QA, TRAIN, null, T);
        assertEquals(1, withChoices.docToTarget(DOC));
        DocRenderer without = new DocRenderer(
                task("task: g\ndoc_to_text: '{{question}}'\ndoc_to_target: '{{answer}}'\n"), QA, TRAIN, null, T);
        assertEquals("1", without.docToTarget(DOC));
    }

    @Test
    void targetsAndChoicesInOtherShapes() throws Exception {
        DocRenderer r = new DocRenderer(task("""
                task: x
                output_type: multiple_choice
                doc_to_text: question
                doc_to_target: "{{[question, 'b']}}"
                doc_to_choice: {A: yes, B: 'no'}
                """), QA, TRAIN, null, T);
        assertEquals(List.of("4+4?", "b"), r.docToTarget(DOC)); // "[...]" read as a Python list
        assertEquals(List.of(true, "no"), r.docToChoice(DOC)); // a mapping's values (YAML 1.1: yes is true)
        DocRenderer lit = new DocRenderer(task("""
                task: x
                output_type: multiple_choice
                doc_to_text: question
                doc_to_target: 0
                doc_to_choice: "{{choices + ['none']}}"
                """), QA, TRAIN, null, T);
        assertEquals(0, lit.docToTarget(DOC));
        assertEquals(List.of("9", "8", "none"), lit.docToChoice(DOC));
        DocRenderer notList =
                new DocRenderer(task("task: x\ndoc_to_text: q\ndoc_to_target: '[not a list'\n"), QA, TRAIN, null, T);
        assertEquals("[not a list", notList.docToTarget(DOC));
    }

    @Test
    void zeroShotContextIsTheText() throws Exception {
        DocRenderer r = new DocRenderer(task(MC), QA, TRAIN, null, T);
        assertEquals("Q: 4+4?\nA:", r.fewshotContext(DOC));
    }

    @Test
    void fewshotContextJoinsDescriptionShotsAndText() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 2\ndescription: \"Maths.\\n\\n\"\nfewshot_config: {sampler: first_n}\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        String expected =
                "Maths.\n\n" + "Q: 1+1?\nA:" + " " + "2" + "\n\n" + "Q: 2+2?\nA:" + " " + "4" + "\n\n" + "Q: 4+4?\nA:";
        assertEquals(expected, r.fewshotContext(DOC));
    }

    @Test
    void fewshotDelimitersFromTheFewshotConfig() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 1\ntarget_delimiter: '|'\nfewshot_delimiter: '##'\n"
                + "fewshot_config: {sampler: first_n, target_delimiter: ' => ', fewshot_delimiter: \"\\n---\\n\"}\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        assertEquals("Q: 1+1?\nA: => 2\n---\nQ: 4+4?\nA:", r.fewshotContext(DOC));
    }

    @Test
    void theScoredDocIsLeftOutOfItsOwnShotsWhenTheSplitsAreTheSame() throws Exception {
        TaskConfig same = task(MC.replace("training_split: train", "fewshot_split: test")
                + "num_fewshot: 1\nfewshot_config: {sampler: first_n}\n");
        DocRenderer r = new DocRenderer(same, QA, TRAIN, null, T);
        assertEquals("Q: 2+2?\nA: 4\n\nQ: 1+1?\nA:", r.fewshotContext(TRAIN.get(0)));
        TaskConfig other = task(MC + "num_fewshot: 1\nfewshot_config: {sampler: first_n}\n");
        assertEquals(
                "Q: 1+1?\nA: 2\n\nQ: 1+1?\nA:",
                new DocRenderer(other, QA, TRAIN, null, T).fewshotContext(TRAIN.get(0)));
    }

    @Test
    void fewshotIndicesAndSamples() throws Exception {
        // lm-eval reads fewshot_indices but never hands it to the sampler: first_n still takes the first
        TaskConfig c = task(MC + "num_fewshot: 1\nfewshot_config: {sampler: first_n, fewshot_indices: [2]}\n");
        assertEquals("Q: 1+1?\nA: 2\n\nQ: 4+4?\nA:", new DocRenderer(c, QA, TRAIN, null, T).fewshotContext(DOC));
        TaskConfig s = task(MC + "num_fewshot: 1\nfewshot_config:\n  sampler: first_n\n  samples:\n"
                + "    - {question: 'x?', choices: [a, b], answer: 1}\n");
        assertEquals("Q: x?\nA: b\n\nQ: 4+4?\nA:", new DocRenderer(s, QA, null, null, T).fewshotContext(DOC));
    }

    @Test
    void theRandomDefaultSamplerIsRefusedUntilRegistered() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 1\n");
        // lm-eval's default sampler: CPython's random.Random(1234).sample(range(3), 1) draws [1], then [0]
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        assertEquals("Q: 2+2?\nA: 4\n\nQ: 4+4?\nA:", r.fewshotContext(DOC));
        assertEquals("Q: 1+1?\nA: 2\n\nQ: 4+4?\nA:", r.fewshotContext(DOC), "one stream, document after document");
        String m = assertThrows(
                        IllegalArgumentException.class,
                        () -> new DocRenderer(
                                        task(MC + "num_fewshot: 1\nfewshot_config: {sampler: balanced}\n"),
                                        QA,
                                        TRAIN,
                                        null,
                                        T)
                                .fewshotContext(DOC))
                .getMessage();
        assertTrue(m.contains("'balanced'") && m.contains("fewshot_config.sampler"), m);
        // an explicit sampler plugs in
        FewShotSampler<Map<String, Object>> last = (n, d) -> TRAIN.subList(TRAIN.size() - n, TRAIN.size());
        assertEquals("Q: 3+3?\nA: 6\n\nQ: 4+4?\nA:", new DocRenderer(c, QA, TRAIN, last, T).fewshotContext(DOC));
    }

    @Test
    void descriptionMayBeATemplateAndSystemInstructionGoesFirst() throws Exception {
        TaskConfig c = task(MC + "description: 'About {{question}}'\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        // no delimiter of its own: lm-eval's descriptions end in their own "\n\n"
        assertEquals("About 4+4?Q: 4+4?\nA:", r.fewshotContext(DOC));
        PromptOptions sys = new PromptOptions("Be brief.", false, false, null);
        assertEquals(
                "Be brief.\n\nAbout 4+4?Q: 4+4?\nA:",
                r.contexts(DOC, sys).get(0).text());
        PromptOptions sysSpace = new PromptOptions("Be brief. ", false, false, null);
        assertEquals(
                "Be brief. About 4+4?Q: 4+4?\nA:",
                r.contexts(DOC, sysSpace).get(0).text());
    }

    @Test
    void genPrefixFollowsTheTextWithTheTargetDelimiterUnlessWhitespaceMeets() throws Exception {
        TaskConfig c = task("task: g\ntest_split: test\ndoc_to_text: '{{question}}'\ndoc_to_target: answer\n"
                + "gen_prefix: 'Answer:'\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        assertEquals("4+4? Answer:", r.fewshotContext(DOC));
        TaskConfig nl =
                task("task: g\ndoc_to_text: \"{{question}}\\n\"\ndoc_to_target: answer\ngen_prefix: 'Answer:'\n");
        assertEquals("4+4?\nAnswer:", new DocRenderer(nl, QA, TRAIN, null, T).fewshotContext(DOC));
    }

    @Test
    void multipleChoiceRequestsOnePerChoice() throws Exception {
        DocRenderer r = new DocRenderer(task(MC), QA, TRAIN, null, T);
        List<LmRequest> rq = r.requests(7, DOC, PromptOptions.DEFAULT);
        assertEquals(2, rq.size());
        for (int i = 0; i < 2; i++) {
            assertEquals("mc", rq.get(i).task());
            assertEquals(7, rq.get(i).docId());
            assertEquals(i, rq.get(i).index());
            assertEquals(OutputType.LOGLIKELIHOOD, rq.get(i).type());
            assertEquals("Q: 4+4?\nA:", rq.get(i).context());
        }
        assertEquals(" 9", rq.get(0).continuation());
        assertEquals(" 8", rq.get(1).continuation());
    }

    @Test
    void mutualInformationAddsUnconditionedRequests() throws Exception {
        DocRenderer r = new DocRenderer(
                task(MC + "metric_list: [{metric: acc}, {metric: acc_mutual_info}]\n"), QA, TRAIN, null, T);
        List<LmRequest> rq = r.requests(0, DOC, PromptOptions.DEFAULT);
        assertEquals(4, rq.size());
        assertEquals("", rq.get(2).context());
        assertEquals(" 9", rq.get(2).continuation());
        assertEquals(3, rq.get(3).index());
    }

    @Test
    void multipleInputsMakeOneContextPerChoice() throws Exception {
        TaskConfig c = task("""
                task: wino
                output_type: multiple_choice
                doc_to_text: "{{label}}"
                doc_to_target: "{{rest}}"
                doc_to_choice: "{{[a, b]}}"
                """);
        Map<String, Object> d = doc("a", "The cat", "b", "The dog", "rest", "barked.", "label", 1);
        List<LmRequest> rq = new DocRenderer(c, List.of("a", "b", "rest", "label"), null, null, T)
                .requests(0, d, PromptOptions.DEFAULT);
        assertEquals(2, rq.size());
        assertEquals("The cat", rq.get(0).context());
        assertEquals("The dog", rq.get(1).context());
        assertEquals(" barked.", rq.get(0).continuation());
        assertEquals(" barked.", rq.get(1).continuation());
    }

    @Test
    void loglikelihoodHasNoDelimiterAdded() throws Exception {
        TaskConfig c = task("task: l\noutput_type: loglikelihood\ndoc_to_text: '{{question}}'\n"
                + "doc_to_target: \"{{' ' + choices[1]}}\"\n");
        List<LmRequest> rq = new DocRenderer(c, QA, TRAIN, null, T).requests(3, DOC, PromptOptions.DEFAULT);
        assertEquals(1, rq.size());
        assertEquals("4+4?", rq.get(0).context());
        assertEquals(" 8", rq.get(0).continuation());
    }

    @Test
    void rollingIsTheTargetAlone() throws Exception {
        TaskConfig c = task("task: ppl\noutput_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: text\n");
        List<LmRequest> rq = new DocRenderer(c, List.of("text"), null, null, T)
                .requests(0, doc("text", "Some words here."), PromptOptions.DEFAULT);
        assertEquals(1, rq.size());
        assertEquals(OutputType.LOGLIKELIHOOD_ROLLING, rq.get(0).type());
        assertNull(rq.get(0).context());
        assertEquals("Some words here.", rq.get(0).continuation());
    }

    @Test
    void generateUntilCarriesTheGenerationKwargs() throws Exception {
        TaskConfig c = task("task: g\ndoc_to_text: 'Q: {{question}}'\ndoc_to_target: answer\nrepeats: 3\n"
                + "generation_kwargs: {until: [\"\\n\"], max_gen_toks: 16}\n");
        List<LmRequest> rq = new DocRenderer(c, QA, TRAIN, null, T).requests(0, DOC, PromptOptions.DEFAULT);
        assertEquals(OutputType.GENERATE_UNTIL, rq.get(0).type());
        assertEquals("Q: 4+4?", rq.get(0).context());
        assertEquals(List.of("\n"), rq.get(0).generation().until());
        assertEquals(16, rq.get(0).generation().maxGenToks());
        assertEquals(3, rq.get(0).repeats());
    }

    @Test
    void chatSingleTurnJoinsTheShotsIntoOneUserMessage() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 2\ndescription: 'Maths.'\nfewshot_config: {sampler: first_n}\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        List<LmRequest> rq = r.requests(0, DOC, new PromptOptions(null, true, false, null));
        assertNull(rq.get(0).context());
        List<Message> expected = List.of(
                new Message("system", "Maths."), new Message("user", "Q: 1+1?\nA: 2\n\nQ: 2+2?\nA: 4\n\nQ: 4+4?\nA:"));
        assertEquals(expected, rq.get(0).chat().messages());
        assertTrue(rq.get(0).chat().addGenerationPrompt());
        // with a chat template and no gen_prefix the choice has no delimiter
        assertEquals("9", rq.get(0).continuation());
    }

    @Test
    void chatMultiTurnKeepsEachShotAsATurn() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 1\nfewshot_config: {sampler: first_n}\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        List<LmRequest> rq = r.requests(0, DOC, new PromptOptions("Sys", true, true, null));
        List<Message> expected = List.of(
                new Message("system", "Sys"),
                new Message("user", "Q: 1+1?\nA:"),
                new Message("assistant", "2"),
                new Message("user", "Q: 4+4?\nA:"));
        assertEquals(expected, rq.get(0).chat().messages());
    }

    @Test
    void chatWithGenPrefixEndsInAnAssistantMessageToContinue() throws Exception {
        TaskConfig c = task(MC + "gen_prefix: 'Answer:'\n");
        List<LmRequest> rq =
                new DocRenderer(c, QA, TRAIN, null, T).requests(0, DOC, new PromptOptions(null, true, false, null));
        List<Message> expected = List.of(new Message("user", "Q: 4+4?\nA:"), new Message("assistant", "Answer:"));
        assertEquals(expected, rq.get(0).chat().messages());
        assertTrue(!rq.get(0).chat().addGenerationPrompt());
        assertEquals(" 9", rq.get(0).continuation()); // gen_prefix ends without whitespace: delimiter kept
    }

    @Test
    void numFewshotOptionOverridesTheTask() throws Exception {
        TaskConfig c = task(MC + "num_fewshot: 2\nfewshot_config: {sampler: first_n}\n");
        DocRenderer r = new DocRenderer(c, QA, TRAIN, null, T);
        assertEquals(
                "Q: 4+4?\nA:",
                r.contexts(DOC, new PromptOptions(null, false, false, 0)).get(0).text());
        assertThrows(IllegalArgumentException.class, () -> new PromptOptions(null, false, true, null));
    }

    @Test
    void aNonTextPromptIsRefusedNamingTheTask() throws Exception {
        TaskConfig c = task("task: bad\ndoc_to_text: answer\ndoc_to_target: question\n");
        String m = assertThrows(
                        IllegalArgumentException.class,
                        () -> new DocRenderer(c, QA, TRAIN, null, T).fewshotContext(DOC))
                .getMessage();
        assertTrue(m.contains("'bad'") && m.contains("doc_to_text"), m);
        TaskConfig undef = task("task: u\ndoc_to_text: '{{nope}}'\n");
        m = assertThrows(
                        IllegalArgumentException.class,
                        () -> new DocRenderer(undef, QA, TRAIN, null, T).fewshotContext(DOC))
                .getMessage();
        assertTrue(m.contains("doc_to_text") && m.contains("nope"), m);
    }

    @Test
    void helpersMatchLmEval() {
        assertEquals("a b", DocRenderer.maybeDelimit("a", "b", " "));
        assertEquals("a\nb", DocRenderer.maybeDelimit("a\n", "b", " "));
        assertEquals("b", DocRenderer.maybeDelimit(null, "b", " "));
        assertEquals("a", DocRenderer.maybeDelimit("a", "", " "));
        assertTrue(DocRenderer.requiresDelimiter("a", "b"));
        assertTrue(!DocRenderer.requiresDelimiter("", "b"));
        assertTrue(!DocRenderer.requiresDelimiter("a", " b"));
        List<Object> l = new ArrayList<>();
        l.add(null);
        assertEquals("[None]", Py.repr(l));
    }
}
