package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.score.SparkTests;
import dev.scorch.udfs.api.ScorchModel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bin/scorch lm-eval --apply_chat_template end to end (local[2]) on a copy of the demo model whose tokenizer_config.json
 * holds a chat template made for this test: a one-shot multiple-choice task with a description and
 * --system_instruction, few-shot as turns (lm-eval's default with a chat template) and as one user message
 * (--fewshot_as_multiturn false). The expected prompts are written out here; the log-likelihoods are checked against
 * the score engine on the tokens lm-eval's _encode_pair gives (the template's BOS not doubled); the results file
 * records the template, the system instruction and their SHA-256 as lm-eval does.
 */
class LmEvalChatTest {
    static final ObjectMapper OM = new ObjectMapper();
    static final String TEMPLATE = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n"
            + "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

    @TempDir
    static Path tmp;

    static Path model;
    static Path tasks;

    @BeforeAll
    static void setUp() throws Exception {
        SparkTests.spark();
        Path demo = DemoModel.resolve("demo");
        model = tmp.resolve("chat-model");
        Files.createDirectories(model);
        try (Stream<Path> s = Files.list(demo)) {
            for (Path f : s.filter(Files::isRegularFile).toList()) {
                Files.copy(f, model.resolve(f.getFileName()));
            }
        }
        ObjectNode cfg =
                (ObjectNode) OM.readTree(model.resolve("tokenizer_config.json").toFile());
        cfg.put("chat_template", TEMPLATE);
        Files.writeString(model.resolve("tokenizer_config.json"), OM.writeValueAsString(cfg));
        tasks = tmp.resolve("tasks");
        Files.createDirectories(tasks);
        Files.writeString(
                tasks.resolve("train.jsonl"), "{\"q\": \"2+2?\", \"choices\": [\"3\", \"4\"], \"answer\": 1}\n");
        Files.writeString(
                tasks.resolve("test.jsonl"), "{\"q\": \"1+1?\", \"choices\": [\"2\", \"5\"], \"answer\": 0}\n");
        Files.writeString(tasks.resolve("chat_mc.yaml"), """
                task: chat_mc
                dataset_path: json
                dataset_kwargs:
                  data_files:
                    train: train.jsonl
                    test: test.jsonl
                training_split: train
                test_split: test
                output_type: multiple_choice
                description: "Sums."
                doc_to_text: "Q: {{q}}\\nA:"
                doc_to_choice: choices
                doc_to_target: answer
                num_fewshot: 1
                fewshot_config:
                  sampler: first_n
                """);
    }

    static Path run(String name, String... more) throws Exception {
        Path out = tmp.resolve(name);
        List<String> args = new ArrayList<>(List.of(
                "lm-eval",
                "--model",
                model.toString(),
                "--tasks",
                "chat_mc",
                "--include_path",
                tasks.toString(),
                "--output_path",
                out.toString(),
                "--log_samples",
                "--system_instruction",
                "Be brief."));
        args.addAll(List.of(more));
        CliRun r = CliRun.of(args.toArray(String[]::new));
        assertEquals(0, r.exit(), r.err());
        return out;
    }

    static JsonNode only(Path dir, String prefix) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> l =
                    s.filter(p -> p.getFileName().toString().startsWith(prefix)).toList();
            assertEquals(1, l.size(), prefix + " in " + dir);
            String text = Files.readString(l.get(0), StandardCharsets.UTF_8);
            return OM.readTree(
                    prefix.startsWith("samples") ? text.lines().findFirst().orElseThrow() : text);
        }
    }

    static String sha256(String s) throws Exception {
        return HexFormat.of()
                .formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    }

    @Test
    void fewshotAsTurnsThroughTheModelsTemplate() throws Exception {
        Path out = run("multiturn", "--apply_chat_template");
        JsonNode sample = only(out, "samples_chat_mc_");
        String expected = "<|bos|>[system]Be brief.\n\nSums.\n[user]Q: 2+2?\nA:\n[assistant]4\n[user]Q: 1+1?\nA:\n"
                + "[assistant]";
        JsonNode args = sample.get("arguments");
        assertEquals(expected, args.get("gen_args_0").get("arg_0").asText());
        assertEquals(expected, args.get("gen_args_1").get("arg_0").asText());
        // no target_delimiter before the choice with a chat template
        assertEquals("2", args.get("gen_args_0").get("arg_1").asText());
        assertEquals("5", args.get("gen_args_1").get("arg_1").asText());
        assertEquals(sha256(expected), sample.get("prompt_hash").asText());
        assertLoglikelihoodsAsScoredDirectly(sample);

        JsonNode results = only(out, "results_");
        assertEquals(TEMPLATE, results.get("chat_template").asText());
        assertEquals(sha256(TEMPLATE), results.get("chat_template_sha").asText());
        assertEquals("Be brief.", results.get("system_instruction").asText());
        assertEquals(sha256("Be brief."), results.get("system_instruction_sha").asText());
        assertTrue(results.get("fewshot_as_multiturn").asBoolean());
    }

    @Test
    void fewshotInOneUserMessageWithMultiturnOff() throws Exception {
        Path out = run("singleturn", "--apply_chat_template", "--fewshot_as_multiturn", "false");
        JsonNode sample = only(out, "samples_chat_mc_");
        assertEquals(
                "<|bos|>[system]Be brief.\n\nSums.\n[user]Q: 2+2?\nA: 4\n\nQ: 1+1?\nA:\n[assistant]",
                sample.get("arguments").get("gen_args_0").get("arg_0").asText());
        assertLoglikelihoodsAsScoredDirectly(sample);
        JsonNode results = only(out, "results_");
        assertTrue(results.get("fewshot_as_multiturn").isBoolean());
        assertTrue(!results.get("fewshot_as_multiturn").asBoolean());
    }

    @Test
    void withoutAChatTemplateNothingIsRecordedAndMultiturnIsRefused() throws Exception {
        Path out = run("plain");
        JsonNode sample = only(out, "samples_chat_mc_");
        assertEquals(
                "Be brief.\n\nSums.Q: 2+2?\nA: 4\n\nQ: 1+1?\nA:",
                sample.get("arguments").get("gen_args_0").get("arg_0").asText());
        JsonNode results = only(out, "results_");
        for (String k : List.of("chat_template", "chat_template_sha", "fewshot_as_multiturn")) {
            assertTrue(results.get(k).isNull(), k + ": " + results.get(k));
        }
        CliRun.assertRefused(
                CliRun.of(
                        "lm-eval",
                        "--model",
                        model.toString(),
                        "--tasks",
                        "chat_mc",
                        "--include_path",
                        tasks.toString(),
                        "--output_path",
                        tmp.resolve("refused").toString(),
                        "--fewshot_as_multiturn"),
                "--fewshot_as_multiturn needs --apply_chat_template");
    }

    @Test
    void aModelWithoutATemplateIsRefusedNamingTheFolder() throws Exception {
        Path bare = tmp.resolve("bare-model");
        Files.createDirectories(bare);
        try (Stream<Path> s = Files.list(model)) {
            for (Path f : s.filter(Files::isRegularFile).toList()) {
                Files.copy(f, bare.resolve(f.getFileName()));
            }
        }
        ObjectNode cfg =
                (ObjectNode) OM.readTree(bare.resolve("tokenizer_config.json").toFile());
        cfg.remove("chat_template");
        Files.writeString(bare.resolve("tokenizer_config.json"), OM.writeValueAsString(cfg));
        CliRun.assertRefused(
                CliRun.of(
                        "lm-eval",
                        "--model",
                        bare.toString(),
                        "--tasks",
                        "chat_mc",
                        "--include_path",
                        tasks.toString(),
                        "--output_path",
                        tmp.resolve("bare-out").toString(),
                        "--apply_chat_template"),
                bare.toString(),
                "no chat template");
    }

    /** Each choice's logged log-likelihood equals the score engine's over lm-eval's _encode_pair tokens. */
    static void assertLoglikelihoodsAsScoredDirectly(JsonNode sample) throws Exception {
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        JsonNode args = sample.get("arguments");
        List<Row> rows = new ArrayList<>();
        List<Integer> contLens = new ArrayList<>();
        for (int j = 0; j < args.size(); j++) {
            String ctx = args.get("gen_args_" + j).get("arg_0").asText();
            String cont = args.get("gen_args_" + j).get("arg_1").asText();
            // the prompt starts with the BOS text, so lm-eval's tok_encode adds no special tokens
            int[] whole = tok.encode(ctx + cont, false);
            int[] c = tok.encode(ctx, false);
            assertEquals(tok.bosTokenId(), whole[0]);
            assertNotEquals(tok.bosTokenId(), whole[1]);
            List<Long> ids = new ArrayList<>();
            Arrays.stream(whole).forEach(t -> ids.add((long) t));
            rows.add(RowFactory.create((long) j, ids));
            contLens.add(whole.length - c.length);
        }
        StructType schema = new StructType()
                .add("id", DataTypes.LongType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false));
        try (ScorchModel m = ScorchModel.load(SparkTests.spark(), model.toString())) {
            for (Row r : m.score(SparkTests.spark().createDataFrame(rows, schema))
                    .select("id", "token_logprobs")
                    .collectAsList()) {
                int j = (int) r.getLong(0);
                List<Object> lp = r.getList(1);
                double ll = 0;
                for (int k = lp.size() - contLens.get(j); k < lp.size(); k++) {
                    ll += ((Number) lp.get(k)).doubleValue();
                }
                double logged = Double.parseDouble(
                        sample.get("resps").get(j).get(0).get(0).asText());
                // the job computes the shared context once (PrefixSharingScorer): within 1e-4 a token
                assertEquals(ll, logged, 1e-4 * contLens.get(j), "choice " + j);
            }
        }
    }
}
