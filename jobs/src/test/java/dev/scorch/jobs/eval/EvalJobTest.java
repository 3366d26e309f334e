package dev.scorch.jobs.eval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The eval job on local[2], each task kind on data whose answer is known by construction: multiple choice and
 * perplexity on the conformance model against its golden log-probs, generate_match on the tiny demo model against
 * its own greedy text; then idempotent reruns and --compare-to's verdicts.
 */
class EvalJobTest {
    @TempDir
    Path tmp;

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = a.get(i).asInt();
        }
        return out;
    }

    static String json(int[] ids) {
        return java.util.Arrays.toString(ids);
    }

    /** log_softmax of the golden last logits of prompt p. */
    static double[] goldenLastLogprobs(JsonNode p) {
        JsonNode l = p.get("last_logits");
        double max = Double.NEGATIVE_INFINITY;
        for (JsonNode v : l) {
            max = Math.max(max, v.asDouble());
        }
        double z = 0;
        for (JsonNode v : l) {
            z += Math.exp(v.asDouble() - max);
        }
        double[] out = new double[l.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = l.get(i).asDouble() - max - Math.log(z);
        }
        return out;
    }

    static int argBest(double[] x, boolean max) {
        int best = 0;
        for (int i = 1; i < x.length; i++) {
            if (max ? x[i] > x[best] : x[i] < x[best]) {
                best = i;
            }
        }
        return best;
    }

    Path write(String name, List<String> lines) {
        try {
            Path p = tmp.resolve(name);
            Files.createDirectories(p.getParent());
            Files.write(p, lines);
            return p;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    EvalReport run(Path model, Path suite, Path out, String runId, String compareTo) {
        try {
            return EvalJob.run(
                    SparkTests.spark(),
                    new EvalSpec(model, suite, out.toString(), runId, compareTo, 2, 1, "shared-path", 4096));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    Map<String, Row> history(Path out, String runId) throws IOException {
        return History.run(SparkTests.spark(), out.toString(), runId);
    }

    /**
     * Four items over golden prompts; the choices are single tokens after the whole prompt: the golden argmax, the
     * argmin and a middle token. Gold is the argmax for items 0 and 2 (right by construction) and the argmin for 1
     * and 3 (wrong): acc = 0.5 exactly. A fifth item's gold is out of range: an error, left out.
     */
    Path choiceData(JsonNode prompts, double[][] expectedLls) {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            JsonNode p = prompts.get(i + 1);
            double[] lp = goldenLastLogprobs(p);
            int best = argBest(lp, true);
            int worst = argBest(lp, false);
            int mid = (best + worst) / 2 == best || (best + worst) / 2 == worst
                    ? (best + 1) % lp.length
                    : (best + worst) / 2;
            expectedLls[i] = new double[] {lp[best], lp[worst], lp[mid]};
            lines.add("{\"id\":\"q" + i + "\",\"context\":" + json(ints(p.get("token_ids"))) + ",\"choices\":[[" + best
                    + "],[" + worst + "],[" + mid + "]],\"gold\":" + (i % 2 == 0 ? 0 : 1) + "}");
        }
        lines.add("{\"id\":\"bad\",\"context\":[1,2],\"choices\":[[3]],\"gold\":4}");
        return write("data/mc.jsonl", lines);
    }

    @Test
    void multipleChoiceAndPerplexityMatchTheGoldenLogprobs() throws Exception {
        Path model = SparkTests.conformanceModel();
        JsonNode prompts = SparkTests.golden().get("prompts");
        double[][] lls = new double[4][];
        choiceData(prompts, lls);
        // Perplexity documents: golden prompts of 2+ tokens, one window each (max_length above their length).
        List<String> docs = new ArrayList<>();
        double nll = 0;
        long tokens = 0;
        int longest = 0;
        for (int i = 0; i < prompts.size(); i++) {
            JsonNode p = prompts.get(i);
            if (p.get("token_ids").size() < 2) {
                continue;
            }
            docs.add("{\"id\":\"d" + i + "\",\"text\":" + json(ints(p.get("token_ids"))) + "}");
            for (JsonNode lp : p.get("next_token_logprobs")) {
                nll -= lp.asDouble();
                tokens++;
            }
            longest = p.get("token_ids").size()
                            > prompts.get(longest).get("token_ids").size()
                    ? i
                    : longest;
        }
        write("data/docs.jsonl", docs);
        int[] longDoc = ints(prompts.get(longest).get("token_ids"));
        write("data/long.jsonl", List.of("{\"text\":" + json(java.util.Arrays.copyOf(longDoc, 20)) + "}"));
        Path suite = write(
                "suite.yaml",
                List.of(
                        "name: golden",
                        "tolerance: 0.01",
                        "tasks:",
                        "  - {name: mc, kind: multiple_choice, data: data/mc.jsonl}",
                        "  - {name: ppl, kind: perplexity, data: data/docs.jsonl, max_length: 512}",
                        "  - {name: windows, kind: perplexity, data: data/long.jsonl, max_length: 8, stride: 4}"));
        Path out = tmp.resolve("out");
        EvalReport report = run(model, suite, out, "r1", null);
        assertEquals(0, report.exitCode());

        Map<String, Row> h = history(out, "r1");
        Row acc = h.get("mc/acc");
        assertEquals(0.5, acc.<Double>getAs("value"), 0);
        assertEquals(Math.sqrt(1.0 / 12), acc.<Double>getAs("stderr"), 1e-12, "sqrt(Σ(x-0.5)² / 3 / 4)");
        assertEquals(4L, acc.<Long>getAs("n"));
        assertEquals(1L, acc.<Long>getAs("errors"));
        assertEquals(Stats.ANALYTIC, acc.getAs("stderr_method"));
        assertEquals(0.01, acc.<Double>getAs("tolerance"), 0, "the suite's tolerance, recorded with the figure");
        assertEquals(
                0.5,
                h.get("mc/acc_norm").<Double>getAs("value"),
                0,
                "one-token choices: per-token normalising changes nothing");
        Map<String, Row> examples = byId(out.resolve("runs/r1/mc"));
        for (int i = 0; i < 4; i++) {
            List<Double> got =
                    examples.get("q" + i).getList(examples.get("q" + i).fieldIndex("choice_logprobs"));
            for (int j = 0; j < 3; j++) {
                assertEquals(lls[i][j], got.get(j), 1e-4, "item " + i + " choice " + j);
            }
        }
        String badError = examples.get("bad").getAs("error");
        assertTrue(badError.contains("not an index"), badError);

        Row ppl = h.get("ppl/perplexity");
        assertEquals(Math.exp(nll / tokens), ppl.<Double>getAs("value"), 1e-4 * Math.exp(nll / tokens));
        assertEquals(Stats.BOOTSTRAP, ppl.getAs("stderr_method"));
        assertTrue(ppl.<Double>getAs("stderr") > 0);
        assertNull(h.get("ppl/bits_per_byte"), "token-id documents have no bytes");
        assertTrue(ppl.<String>getAs("model").startsWith("model@"));
        assertEquals(64, ppl.<String>getAs("data_hash").length());

        // 20 tokens, windows of 8 moving on 4: [0,8) scores 1..7, [4,12) 8..11, [8,16) 12..15, [12,20) 16..19.
        Row w = byId(out.resolve("runs/r1/windows")).get("0");
        assertEquals(4, w.<Integer>getAs("windows"));
        assertEquals(19L, w.<Long>getAs("num_tokens"));
        DeepseekV3Model m = DeepseekV3Model.load(model);
        double expected = 0;
        try (CpuOps ops = new CpuOps(1)) {
            Scorer scorer = new Scorer(m.on(ops));
            int[][] spans = {{0, 8, 1}, {4, 12, 4}, {8, 16, 4}, {12, 20, 4}
            }; // begin, end, first new position in the window
            for (int[] s : spans) {
                float[] lp = scorer.score(List.of(ScoreRequest.of(java.util.Arrays.copyOfRange(longDoc, s[0], s[1]))))
                        .get(0)
                        .tokenLogprobs();
                for (int k = s[2]; k < lp.length; k++) {
                    expected -= lp[k];
                }
            }
        }
        assertEquals(expected, w.<Double>getAs("nll"), 1e-6 * Math.abs(expected));
    }

    Map<String, Row> byId(Path dir) {
        Map<String, Row> out = new HashMap<>();
        for (Row r : SparkTests.spark().read().parquet(dir.toString()).collectAsList()) {
            out.put(r.getAs("example_id"), r);
        }
        return out;
    }

    @Test
    void generateMatchComparesTheGreedyCompletionExactlyAndNormalised() throws Exception {
        Path model = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        DeepseekV3Model m = DeepseekV3Model.load(model);
        String prompt = "The model is here and the";
        String greedy;
        try (CpuOps ops = new CpuOps(1)) {
            greedy = new Generator(m, ops, Long.MAX_VALUE, tok)
                    .generate(List.of(new GenerationRequest(
                            tok.encode(prompt, true),
                            SamplingParams.greedy(),
                            6,
                            Set.of(m.config().eosTokenIds().get(0)),
                            List.of(),
                            1,
                            0)))
                    .get(0)
                    .get(0)
                    .text();
        }
        com.fasterxml.jackson.databind.ObjectMapper om = new com.fasterxml.jackson.databind.ObjectMapper();
        write(
                "data/gen.jsonl",
                List.of(
                        "{\"id\":\"same\",\"prompt\":" + om.writeValueAsString(prompt) + ",\"answer\":"
                                + om.writeValueAsString(greedy) + "}",
                        "{\"id\":\"normalised\",\"prompt\":" + om.writeValueAsString(prompt) + ",\"answer\":"
                                + om.writeValueAsString("The " + greedy + " .") + "}",
                        "{\"id\":\"wrong\",\"prompt\":" + om.writeValueAsString(prompt) + ",\"answer\":\"Paris\"}",
                        "{\"id\":\"empty\",\"prompt\":\"\",\"answer\":\"x\"}"));
        Path suite = write(
                "suite.yaml",
                List.of(
                        "name: gen",
                        "tasks:",
                        "  - {name: g, kind: generate_match, data: data/gen.jsonl, columns: {reference: answer}, max_new_tokens: 6}"));
        Path out = tmp.resolve("out");
        run(model, suite, out, "r1", null);
        Map<String, Row> h = history(out, "r1");
        assertEquals(1.0 / 3, h.get("g/exact_match").<Double>getAs("value"), 1e-12);
        assertEquals(2.0 / 3, h.get("g/normalized_match").<Double>getAs("value"), 1e-12);
        assertEquals(3L, h.get("g/exact_match").<Long>getAs("n"));
        assertEquals(1L, h.get("g/exact_match").<Long>getAs("errors"));
        Map<String, Row> ex = byId(out.resolve("runs/r1/g"));
        assertEquals(greedy, ex.get("same").getAs("completion"));
        assertEquals("prompt is empty", ex.get("empty").getAs("error"));
    }

    @Test
    void rerunsReplaceOnlyTheirRunAndCompareToGatesOnTheTolerance() throws Exception {
        Path model = SparkTests.conformanceModel();
        JsonNode prompts = SparkTests.golden().get("prompts");
        choiceData(prompts, new double[4][]);
        Path suite = write(
                "suite.yaml",
                List.of(
                        "name: gate",
                        "tolerance: 0.1",
                        "tasks:",
                        "  - {name: mc, kind: multiple_choice, data: data/mc.jsonl}"));
        Path out = tmp.resolve("out");
        run(model, suite, out, "base", null);
        EvalReport same = run(model, suite, out, "base", "base"); // the same run id again, compared with itself
        assertEquals(0, same.exitCode(), String.join("\n", same.comparison()));
        assertEquals(
                2,
                SparkTests.spark()
                        .read()
                        .parquet(out.resolve("history").toString())
                        .count(),
                "two metrics: the rerun replaced its own rows");

        // Flip item 0's gold to a wrong choice: acc falls from 0.5 to 0.25, more than the tolerance 0.1.
        List<String> lines = Files.readAllLines(tmp.resolve("data/mc.jsonl"));
        lines.set(0, lines.get(0).replace("\"gold\":0", "\"gold\":2"));
        Files.write(tmp.resolve("data/mc.jsonl"), lines);
        EvalReport worse = run(model, suite, out, "worse", "base");
        assertEquals(3, worse.exitCode());
        assertEquals(
                2 * 2,
                SparkTests.spark()
                        .read()
                        .parquet(out.resolve("history").toString())
                        .count(),
                "base and worse, two metrics each");
        assertEquals(2, worse.regressions().size(), String.join("\n", worse.comparison()));
        assertTrue(worse.regressions().get(0).contains("mc")
                && worse.regressions().get(0).contains("REGRESSION"));
        assertThrows(IllegalArgumentException.class, () -> run(model, suite, out, "x", "no-such-run"));

        // The command line returns the same verdict as its exit code (it runs on the shared session and leaves it up).
        int code = ScorchCli.commandLine()
                .execute(
                        "eval",
                        "--model",
                        model.toString(),
                        "--suite",
                        suite.toString(),
                        "--output",
                        out.toString(),
                        "--run-id",
                        "cli",
                        "--compare-to",
                        "base");
        assertEquals(3, code);
        assertTrue(!SparkTests.spark().sparkContext().isStopped(), "a session the command did not make stays up");
    }

    @Test
    void aSuiteWithAnUnknownFieldOrKindIsRefusedNamingIt() {
        Path data = write("data/x.jsonl", List.of("{\"text\":\"a\"}"));
        Path a = write(
                "a.yaml",
                List.of("name: a", "tasks:", "  - {name: t, kind: perplexity, data: data/x.jsonl, window: 3}"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> EvalSuite.read(a));
        assertTrue(e.getMessage().contains("a.yaml") && e.getMessage().contains("tasks[0].window"), e.getMessage());
        Path b = write("b.yaml", List.of("name: b", "tasks:", "  - {name: t, kind: rouge, data: data/x.jsonl}"));
        e = assertThrows(IllegalArgumentException.class, () -> EvalSuite.read(b));
        assertTrue(e.getMessage().contains("tasks[0].kind 'rouge'"), e.getMessage());
        Path c = write(
                "c.yaml", List.of("name: c", "tasks:", "  - {name: t, kind: perplexity, data: data/missing.jsonl}"));
        e = assertThrows(IllegalArgumentException.class, () -> EvalSuite.read(c));
        assertTrue(
                e.getMessage().contains("missing.jsonl") && e.getMessage().contains("does not exist"), e.getMessage());
        assertTrue(Files.exists(data));
    }
}
