package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.score.SparkTests;
import dev.scorch.udfs.api.ScorchModel;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
 * bin/scorch lm-eval end to end on the demo model (local[2], in-process through the CLI): the built-in scorch_demo
 * group (multiple_choice, generate_until with a regex filter, loglikelihood_rolling) plus a loglikelihood task, with
 * --limit 2 and --log_samples. The expected figures are worked out here: log-likelihoods by scoring the same token
 * sequences directly with the score engine, acc and acc_norm from them, exact_match from the generated text through
 * the regex, perplexities from the logged log-likelihoods and word and byte counts; then a !function task refused,
 * refused options, and the --compare-to gate.
 */
class LmEvalJobTest {
    @TempDir
    static Path tmp;

    static Path out;
    static Path include;
    static int firstExit;
    static JsonNode results;
    static Path model;
    static final ObjectMapper OM = new ObjectMapper();

    static int cli(StringWriter err, String... args) {
        var cl = ScorchCli.commandLine();
        if (err != null) {
            cl.setErr(new PrintWriter(err, true));
        }
        return cl.execute(args);
    }

    @BeforeAll
    static void runOnce() throws Exception {
        SparkTests.spark();
        model = DemoModel.resolve("demo");
        include = tmp.resolve("tasks");
        Files.createDirectories(include);
        Files.writeString(
                include.resolve("qa.jsonl"),
                "{\"q\": \"What is 1 + 1?\", \"a\": \"2\"}\n{\"q\": \"Name a color.\", \"a\": \"blue\"}\n"
                        + "{\"q\": \"Unused?\", \"a\": \"yes\"}\n");
        Files.writeString(include.resolve("qa_ll.yaml"), """
                task: qa_ll
                dataset_path: json
                dataset_kwargs:
                  data_files:
                    test: qa.jsonl
                test_split: test
                output_type: loglikelihood
                doc_to_text: "Q: {{q}}\\nA:"
                doc_to_target: " {{a}}"
                metric_list:
                  - metric: perplexity
                  - metric: acc
                metadata:
                  version: 2.0
                """);
        out = tmp.resolve("out");
        firstExit = cli(
                null,
                "lm-eval",
                "--model",
                "demo",
                "--tasks",
                "scorch_demo,qa_ll",
                "--include_path",
                include.toString(),
                "--limit",
                "2",
                "--output_path",
                out.toString(),
                "--log_samples",
                "--bootstrap_iters",
                "1000",
                "--run-id",
                "base");
        results = OM.readTree(only(out, "results_").toFile());
    }

    static Path only(Path dir, String prefix) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> l =
                    s.filter(p -> p.getFileName().toString().startsWith(prefix)).toList();
            assertEquals(1, l.size(), prefix + " files in " + dir + ": " + l);
            return l.get(0);
        }
    }

    static List<JsonNode> samples(String task) throws Exception {
        List<JsonNode> outl = new ArrayList<>();
        for (String line : Files.readAllLines(only(out, "samples_" + task + "_"), StandardCharsets.UTF_8)) {
            outl.add(OM.readTree(line));
        }
        return outl;
    }

    /** Sums the log-probs of the continuation's tokens, scored directly by the score engine. */
    static double[] scoreDirect(List<int[]> seqs, List<Integer> contLens) {
        List<Row> rows = new ArrayList<>();
        for (int i = 0; i < seqs.size(); i++) {
            List<Long> ids = new ArrayList<>();
            for (int t : seqs.get(i)) {
                ids.add((long) t);
            }
            rows.add(RowFactory.create((long) i, ids));
        }
        StructType schema = new StructType()
                .add("id", DataTypes.LongType)
                .add("token_ids", new ArrayType(DataTypes.LongType, false));
        double[] lls = new double[seqs.size()];
        try (ScorchModel m = ScorchModel.load(SparkTests.spark(), model.toString())) {
            for (Row r : m.score(SparkTests.spark().createDataFrame(rows, schema))
                    .select("id", "token_logprobs")
                    .collectAsList()) {
                int i = (int) r.getLong(0);
                List<Object> lp = r.getList(1);
                for (int k = lp.size() - contLens.get(i); k < lp.size(); k++) {
                    lls[i] += ((Number) lp.get(k)).doubleValue();
                }
            }
        }
        return lls;
    }

    /** lm-eval's _encode_pair with the HF tokenizer's default special tokens, written out independently. */
    static int[][] encodePair(Tokenizer tok, String ctx, String cont) {
        String c = ctx.replaceAll("\\s+$", "");
        String moved = ctx.substring(c.length()) + cont;
        int[] whole = tok.encode(c + moved, true);
        int[] ce = tok.encode(c, true);
        return new int[][] {ce, Arrays.copyOfRange(whole, ce.length, whole.length)};
    }

    static int argmax(double[] x) {
        int b = 0;
        for (int i = 1; i < x.length; i++) {
            if (x[i] > x[b]) {
                b = i;
            }
        }
        return b;
    }

    @Test
    void resultsFileHasLmEvalsLayout() throws Exception {
        assertEquals(0, firstExit);
        for (String k : List.of(
                "results",
                "groups",
                "group_subtasks",
                "configs",
                "versions",
                "n-shot",
                "higher_is_better",
                "n-samples",
                "config")) {
            assertTrue(results.has(k), k + " in " + results.fieldNames());
        }
        assertEquals(
                List.of("capitals_mc", "arithmetic_gen", "docs_ppl"),
                OM.convertValue(results.get("group_subtasks").get("scorch_demo"), List.class));
        assertEquals(2, results.get("n-shot").get("capitals_mc").asInt());
        long docs = Files.readAllLines(LmEvalJob.builtinTasks().resolve("data/capitals_test.jsonl")).stream()
                .filter(l -> !l.isBlank())
                .count();
        assertEquals(
                docs,
                results.get("n-samples").get("capitals_mc").get("original").asInt());
        assertEquals(
                2, results.get("n-samples").get("capitals_mc").get("effective").asInt());
        assertEquals(2.0, results.get("versions").get("qa_ll").asDouble());
        assertTrue(results.get("higher_is_better").get("capitals_mc").get("acc").asBoolean());
        assertFalse(results.get("higher_is_better")
                .get("docs_ppl")
                .get("word_perplexity")
                .asBoolean());
        assertEquals(
                "multiple_choice",
                results.get("configs").get("capitals_mc").get("output_type").asText());
        assertEquals(2, results.get("config").get("limit").asInt());
        assertEquals(1234, results.get("config").get("fewshot_seed").asInt());
    }

    @Test
    void multipleChoiceAccFromDirectlyScoredLogprobs() throws Exception {
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        List<JsonNode> s = samples("capitals_mc");
        assertEquals(2, s.size());
        double acc = 0;
        double accNorm = 0;
        for (JsonNode doc : s) {
            JsonNode args = doc.get("arguments");
            int k = args.size();
            List<int[]> seqs = new ArrayList<>();
            List<Integer> lens = new ArrayList<>();
            double[] norm = new double[k];
            for (int j = 0; j < k; j++) {
                JsonNode a = args.get("gen_args_" + j);
                int[][] p =
                        encodePair(tok, a.get("arg_0").asText(), a.get("arg_1").asText());
                int[] all = Arrays.copyOf(p[0], p[0].length + p[1].length);
                System.arraycopy(p[1], 0, all, p[0].length, p[1].length);
                seqs.add(all);
                lens.add(p[1].length);
            }
            double[] lls = scoreDirect(seqs, lens);
            for (int j = 0; j < k; j++) {
                double logged =
                        Double.parseDouble(doc.get("resps").get(j).get(0).get(0).asText());
                // the job computes each document's context once (PrefixSharingScorer): within 1e-4 a token
                assertEquals(lls[j], logged, 1e-4 * lens.get(j), "choice " + j + " of doc " + doc.get("doc_id"));
                String choice = doc.get("doc").get("choices").get(j).asText();
                norm[j] = lls[j] / choice.length();
            }
            int gold = doc.get("doc").get("answer").asInt();
            double a = argmax(lls) == gold ? 1 : 0;
            double an = argmax(norm) == gold ? 1 : 0;
            assertEquals(a, doc.get("acc").asDouble());
            assertEquals(an, doc.get("acc_norm").asDouble());
            acc += a / s.size();
            accNorm += an / s.size();
        }
        JsonNode r = results.get("results").get("capitals_mc");
        assertEquals(acc, r.get("acc,none").asDouble(), 1e-12);
        assertEquals(accNorm, r.get("acc_norm,none").asDouble(), 1e-12);
        // the group's acc is capitals_mc's (the only task with acc), weighted by size
        assertEquals(
                acc, results.get("groups").get("scorch_demo").get("acc,none").asDouble(), 1e-12);
        // the prompt: the description, two first_n shots, then the question
        String ctx = s.get(0).get("arguments").get("gen_args_0").get("arg_0").asText();
        assertTrue(
                ctx.startsWith("The following are questions about capital cities.\n\nQuestion: What is the capital"
                        + " of Spain?\nAnswer: Madrid\n\n"),
                ctx);
    }

    @Test
    void generateUntilExactMatchFromTheGeneratedText() throws Exception {
        List<JsonNode> s = samples("arithmetic_gen");
        assertEquals(2, s.size());
        Pattern num = Pattern.compile("(-?[0-9]+)");
        double em = 0;
        for (JsonNode doc : s) {
            String text = doc.get("resps").get(0).get(0).asText();
            assertFalse(text.contains("\n"), "cut at the stop string: " + text);
            Matcher m = num.matcher(text);
            String filtered = m.find() ? m.group(1) : "[invalid]";
            assertEquals(filtered, doc.get("filtered_resps").get(0).asText());
            assertEquals("strict-match", doc.get("filter").asText());
            double e = filtered.equalsIgnoreCase(doc.get("target").asText()) ? 1 : 0;
            assertEquals(e, doc.get("exact_match").asDouble());
            em += e / s.size();
        }
        assertEquals(
                em,
                results.get("results")
                        .get("arithmetic_gen")
                        .get("exact_match,strict-match")
                        .asDouble(),
                1e-12);
    }

    @Test
    void rollingPerplexitiesFromTheLoggedLoglikelihoods() throws Exception {
        List<JsonNode> s = samples("docs_ppl");
        double ll = 0;
        long words = 0;
        long bytes = 0;
        for (JsonNode doc : s) {
            ll += Double.parseDouble(doc.get("resps").get(0).get(0).asText());
            String text = doc.get("doc").get("text").asText();
            words += text.split("\\s+", -1).length;
            bytes += text.getBytes(StandardCharsets.UTF_8).length;
        }
        JsonNode r = results.get("results").get("docs_ppl");
        assertEquals(Math.exp(-ll / words), r.get("word_perplexity,none").asDouble(), 1e-9);
        assertEquals(Math.exp(-ll / bytes), r.get("byte_perplexity,none").asDouble(), 1e-9);
        assertEquals(-ll / bytes / Math.log(2), r.get("bits_per_byte,none").asDouble(), 1e-9);
        assertEquals("N/A", r.get("word_perplexity_stderr,none").asText());
        // the whole text scored once, after the prefix token: one window, BOS-prefixed as the tokenizer encodes it
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        String text = s.get(0).get("doc").get("text").asText();
        int[] enc = tok.encode(text, true);
        int[] seq = new int[enc.length + 1];
        seq[0] = tok.bosTokenId();
        System.arraycopy(enc, 0, seq, 1, enc.length);
        double direct = scoreDirect(List.of(seq), List.of(enc.length))[0];
        assertEquals(
                direct, Double.parseDouble(s.get(0).get("resps").get(0).get(0).asText()), 1e-6);
    }

    @Test
    void loglikelihoodPerplexityAndGreedyAcc() throws Exception {
        List<JsonNode> s = samples("qa_ll");
        assertEquals(2, s.size());
        double sum = 0;
        double acc = 0;
        for (JsonNode doc : s) {
            JsonNode resp = doc.get("resps").get(0).get(0);
            double ll = Double.parseDouble(resp.get(0).asText());
            assertEquals(ll, doc.get("perplexity").asDouble(), 0);
            sum += ll;
            acc += resp.get(1).asText().equals("True") ? 0.5 : 0;
        }
        JsonNode r = results.get("results").get("qa_ll");
        assertEquals(Math.exp(-sum / 2), r.get("perplexity,none").asDouble(), 1e-9);
        assertEquals(acc, r.get("acc,none").asDouble(), 1e-12);
        assertTrue(r.get("perplexity_stderr,none").isNumber(), "bootstrapped: " + r);
    }

    @Test
    void aFunctionHookIsRefusedNamingTaskAndHook() throws Exception {
        Path dir = tmp.resolve("py");
        Files.createDirectories(dir);
        Files.writeString(
                dir.resolve("hooked.yaml"),
                "task: hooked\ndataset_path: json\ndataset_kwargs: {data_files: {test: x.jsonl}}\ntest_split: test\n"
                        + "output_type: generate_until\ndoc_to_text: !function utils.doc_to_text\n"
                        + "doc_to_target: a\n");
        StringWriter err = new StringWriter();
        int code = cli(
                err,
                "lm-eval",
                "--model",
                "demo",
                "--tasks",
                "hooked",
                "--include_path",
                dir.toString(),
                "--output_path",
                tmp.resolve("py-out").toString());
        assertEquals(2, code);
        assertTrue(err.toString().contains("hooked") && err.toString().contains("utils.doc_to_text"), err.toString());
    }

    @Test
    void unsupportedOptionsAreRefused() {
        StringWriter err = new StringWriter();
        assertEquals(
                2,
                cli(
                        err,
                        "lm-eval",
                        "--model",
                        "demo",
                        "--tasks",
                        "capitals_mc",
                        "--fewshot_as_multiturn",
                        "--output_path",
                        tmp.resolve("x").toString()));
        assertTrue(err.toString().contains("--fewshot_as_multiturn needs --apply_chat_template"), err.toString());
        err = new StringWriter();
        assertEquals(
                2,
                cli(
                        err,
                        "lm-eval",
                        "--model",
                        "demo",
                        "--tasks",
                        "capitals_mc",
                        "--batch_size",
                        "8",
                        "--output_path",
                        tmp.resolve("x").toString()));
        assertTrue(err.toString().contains("not supported"), err.toString());
    }

    @Test
    void compareToGatesOnTheHistory() throws Exception {
        String[] base = {
            "lm-eval",
            "--model",
            "demo",
            "--tasks",
            "capitals_mc",
            "--limit",
            "2",
            "--output_path",
            out.toString(),
            "--compare-to",
            "base"
        };
        List<String> same = new ArrayList<>(List.of(base));
        same.addAll(List.of("--run-id", "same"));
        assertEquals(0, cli(null, same.toArray(String[]::new)), "the same figures pass");
        List<String> strict = new ArrayList<>(List.of(base));
        strict.addAll(List.of("--run-id", "strict", "--tolerance", "-1"));
        assertEquals(3, cli(null, strict.toArray(String[]::new)), "a negative tolerance fails every metric");
        List<String> missing = new ArrayList<>(List.of(base));
        missing.set(missing.size() - 1, "no-such-run");
        missing.addAll(List.of("--run-id", "other"));
        assertEquals(2, cli(null, missing.toArray(String[]::new)));
        assertTrue(Files.isDirectory(out.resolve("history")));
    }
}
