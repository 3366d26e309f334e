package dev.scorch.jobs.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.backend.BackendMode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.device.GemmPrecision;
import dev.scorch.engine.generation.Completion;
import dev.scorch.engine.generation.GenerationRequest;
import dev.scorch.engine.generation.Generator;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.sampling.SamplingParams;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.output.WriteMode;
import dev.scorch.jobs.score.SparkTests;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The generate job on local[2]: golden greedy continuations, seeded sampling across layouts, bad rows, EOS and stops, resume. */
class GenerateJobTest {
    @TempDir
    static Path models;

    @TempDir
    Path tmp;

    static Path demo;

    @BeforeAll
    static void demoModel() throws IOException {
        demo = models.resolve("demo-tiny");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(demo);
    }

    /** A GenerateSpec with the CLI's defaults (greedy, 2 partitions, shared-path, 1 thread, Parquet out). */
    static final class Spec {
        Path model;
        String input;
        String output;
        String outputFormat = "parquet";
        int partitions = 2;
        int threads = 1;
        boolean resume;
        Integer maxNewTokens = 16;
        Double temperature;
        Integer topK;
        Double topP;
        long seed;
        List<String> stop = List.of();
        boolean ignoreEos;
        int n = 1;
        boolean logprobs;
        int topLogprobs;
        int maxBatchTokens = 4096;
        int maxBatchSeqs = 32;
        String weights = "shared-path";

        Spec(Path model, Path input, Path output) {
            this.model = model;
            this.input = input.toString();
            this.output = output.toString();
        }

        GenerateSpec build() {
            return new GenerateSpec(
                    model.toString(),
                    input,
                    null,
                    output,
                    outputFormat,
                    partitions,
                    "id",
                    "token_ids",
                    "prompt",
                    "messages",
                    weights,
                    threads,
                    1,
                    resume ? WriteMode.RESUME : WriteMode.NEW,
                    maxNewTokens,
                    temperature,
                    topK,
                    topP,
                    0,
                    1,
                    0,
                    0,
                    seed,
                    stop,
                    List.of(),
                    ignoreEos,
                    n,
                    logprobs,
                    topLogprobs,
                    256L << 20,
                    maxBatchTokens,
                    maxBatchSeqs,
                    BackendMode.AUTO,
                    GemmPrecision.BF16X3,
                    null);
        }

        GenerateSummary run() {
            try {
                return GenerateJob.run(SparkTests.spark(), build());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** One output row as plain values. */
    record Generated(
            String id,
            int sample,
            String completion,
            List<Integer> tokenIds,
            String finishReason,
            Integer promptTokens,
            Integer completionTokens,
            List<Float> logprobs,
            String error,
            String model) {}

    /** The output rows by "id#sample"; fails on a duplicate. */
    static Map<String, Generated> read(Path out, String format) {
        var reader = SparkTests.spark().read();
        var df = format.equals("parquet") ? reader.parquet(out.toString()) : reader.json(out.toString());
        List<String> cols = List.of(df.columns());
        Map<String, Generated> rows = new TreeMap<>();
        for (Row r : df.collectAsList()) {
            // JSONL leaves out null fields, so a column no row fills is absent.
            Generated g = new Generated(
                    String.valueOf((Object) r.getAs("id")),
                    ((Number) r.getAs("sample")).intValue(),
                    string(r, "completion", cols),
                    list(r, "completion_token_ids", cols, Number::intValue),
                    r.getAs("finish_reason"),
                    intOrNull(r, "num_prompt_tokens", cols),
                    intOrNull(r, "num_completion_tokens", cols),
                    list(r, "token_logprobs", cols, Number::floatValue),
                    string(r, "error", cols),
                    r.getAs("model"));
            assertNull(rows.put(g.id() + "#" + g.sample(), g), "duplicate row " + g.id() + "#" + g.sample());
        }
        return rows;
    }

    static <T> List<T> list(Row r, String c, List<String> cols, java.util.function.Function<Number, T> f) {
        if (!cols.contains(c) || r.isNullAt(r.fieldIndex(c))) {
            return null;
        }
        List<T> out = new ArrayList<>();
        for (Object o : r.getList(r.fieldIndex(c))) {
            out.add(f.apply((Number) o));
        }
        return out;
    }

    static String string(Row r, String c, List<String> cols) {
        return cols.contains(c) ? r.getAs(c) : null;
    }

    static Integer intOrNull(Row r, String c, List<String> cols) {
        return !cols.contains(c) || r.isNullAt(r.fieldIndex(c)) ? null : ((Number) r.getAs(c)).intValue();
    }

    static List<Integer> ints(JsonNode a) {
        List<Integer> out = new ArrayList<>();
        a.forEach(v -> out.add(v.asInt()));
        return out;
    }

    static int[] array(List<Integer> l) {
        return l.stream().mapToInt(Integer::intValue).toArray();
    }

    @Test
    void greedyCompletionsEqualTheGoldenContinuations() {
        Path out = tmp.resolve("out");
        Spec s = new Spec(SparkTests.conformanceModel(), SparkTests.goldenInput(tmp), out);
        s.ignoreEos = true;
        s.logprobs = true;
        s.maxBatchSeqs = 3; // sequences join as others finish
        GenerateSummary summary = s.run();
        Map<String, Generated> rows = read(out, "parquet");
        JsonNode prompts = SparkTests.golden().get("prompts");
        assertEquals(prompts.size(), rows.size());
        assertEquals(prompts.size(), summary.rows());
        assertEquals(16L * prompts.size(), summary.completionTokens());
        for (int i = 0; i < prompts.size(); i++) {
            Generated g = rows.get(i + "#0");
            assertNull(g.error(), g.error());
            assertEquals(ints(prompts.get(i).get("greedy_continuation")), g.tokenIds(), "prompt " + i);
            assertEquals("length", g.finishReason());
            assertEquals(prompts.get(i).get("token_ids").size(), g.promptTokens());
            assertEquals(16, g.completionTokens());
            assertNull(g.completion(), "the conformance model ships no tokenizer: no text");
            assertEquals(16, g.logprobs().size());
            for (float lp : g.logprobs()) {
                assertTrue(lp <= 0 && lp > -30, "log-prob " + lp);
            }
            assertTrue(g.model().startsWith("model@"), g.model());
        }
    }

    /** Token-id, text and chat rows with per-row settings, n = 2. */
    Path mixedInput() {
        return SparkTests.writeJsonl(
                tmp.resolve("mixed.jsonl"),
                List.of(
                        "{\"id\":\"t1\",\"token_ids\":[5,17,300,42]}",
                        "{\"id\":\"t2\",\"token_ids\":[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,1],\"seed\":99}",
                        "{\"id\":\"p1\",\"prompt\":\"The quick brown fox\"}",
                        "{\"id\":\"p2\",\"prompt\":\"Models write text and\",\"temperature\":0.3,\"max_new_tokens\":5}",
                        "{\"id\":\"p3\",\"prompt\":\"Once upon a time\",\"top_k\":3,\"seed\":5}",
                        "{\"id\":\"c1\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello there\"}]}",
                        "{\"id\":\"c2\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Why?\"}],"
                                + "\"seed\":3}",
                        "{\"id\":\"p4\",\"prompt\":\"Spark runs the model\",\"min_p\":0.2,\"repetition_penalty\":1.3}"));
    }

    Spec sampled(Path input, Path out) {
        Spec s = new Spec(demo, input, out);
        s.temperature = 0.9;
        s.topK = 50;
        s.topP = 0.95;
        s.seed = 7;
        s.n = 2;
        s.maxNewTokens = 10;
        return s;
    }

    @Test
    void seededSamplingGivesTheSameTextAcrossBatchSizesAndPartitions() throws Exception {
        Path input = mixedInput();
        // One partition, one sequence at a time, prompts prefilled one by one...
        Spec narrow = sampled(input, tmp.resolve("narrow"));
        narrow.partitions = 1;
        narrow.maxBatchSeqs = 1;
        narrow.maxBatchTokens = 1;
        narrow.run();
        // ... against three partitions, wide batches and two engine threads.
        Spec wide = sampled(input, tmp.resolve("wide"));
        wide.partitions = 3;
        wide.threads = 2;
        wide.run();
        Map<String, Generated> a = read(tmp.resolve("narrow"), "parquet");
        Map<String, Generated> b = read(tmp.resolve("wide"), "parquet");
        assertEquals(16, a.size(), "8 rows × 2 samples");
        assertEquals(a.keySet(), b.keySet());
        boolean samplesDiffer = false;
        for (String k : a.keySet()) {
            Generated x = a.get(k);
            Generated y = b.get(k);
            assertNull(x.error(), k + ": " + x.error());
            assertEquals(x.tokenIds(), y.tokenIds(), k);
            assertEquals(x.completion(), y.completion(), k);
            assertEquals(x.finishReason(), y.finishReason(), k);
            if (k.endsWith("#0")) {
                samplesDiffer |=
                        !x.tokenIds().equals(a.get(k.replace("#0", "#1")).tokenIds());
            }
        }
        assertTrue(samplesDiffer, "the two samples of a row draw different streams");
        assertTrue(a.get("p2#0").completionTokens() <= 5, "a row's max_new_tokens wins over the job's");

        // The job passes each row's settings through unchanged: the engine on the same request gives the same
        // completion.
        Tokenizer tok = Tokenizers.load(demo).orElseThrow();
        DeepseekV3Model m = DeepseekV3Model.load(demo);
        Set<Integer> eos = Set.of(m.config().eosTokenIds().get(0));
        try (CpuOps ops = new CpuOps(1)) {
            Generator g = new Generator(m, ops, Long.MAX_VALUE, tok);
            List<Completion> p3 = g.generate(List.of(new GenerationRequest(
                            tok.encode("Once upon a time", true),
                            new SamplingParams(0.9, 3, 0.95, 0, 1, 0, 0, 5),
                            10,
                            eos,
                            List.of(),
                            2,
                            0)))
                    .get(0);
            List<Completion> c1 = g.generate(List.of(new GenerationRequest(
                            tok.encode(
                                    tok.chatTemplate()
                                            .orElseThrow()
                                            .render(
                                                    List.of(new dev.scorch.engine.tokenizer.ChatTemplate.Message(
                                                            "user", "Hello there")),
                                                    true),
                                    false),
                            new SamplingParams(0.9, 50, 0.95, 0, 1, 0, 0, 7),
                            10,
                            eos,
                            List.of(),
                            2,
                            0)))
                    .get(0);
            for (int s = 0; s < 2; s++) {
                assertArrayEquals(p3.get(s).tokenIds(), array(a.get("p3#" + s).tokenIds()), "p3 sample " + s);
                assertEquals(p3.get(s).text(), a.get("p3#" + s).completion());
                assertArrayEquals(c1.get(s).tokenIds(), array(a.get("c1#" + s).tokenIds()), "c1 sample " + s);
            }
        }
    }

    @Test
    void everyBadRowGetsAnErrorRowAndTheGoodOnesStillRun() {
        Path input = SparkTests.writeJsonl(
                tmp.resolve("bad.jsonl"),
                List.of(
                        "{\"id\":\"good\",\"token_ids\":[1,2,3]}",
                        "{\"id\":\"empty-ids\",\"token_ids\":[]}",
                        "{\"id\":\"oov\",\"token_ids\":[1,99999]}",
                        "{\"id\":\"empty-prompt\",\"prompt\":\"\"}",
                        "{\"id\":\"nothing\"}",
                        "{\"id\":\"too-long\",\"token_ids\":[1,2,3],\"max_new_tokens\":5000}",
                        "{\"id\":\"bad-temp\",\"token_ids\":[1,2,3],\"temperature\":-1}",
                        "{\"id\":\"no-messages\",\"messages\":[]}",
                        "{\"id\":\"chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                        "{\"token_ids\":[1,2,3]}"));
        Path out = tmp.resolve("out");
        Spec s = new Spec(demo, input, out);
        s.maxNewTokens = 4;
        s.n = 2;
        GenerateSummary summary = s.run();
        Map<String, Generated> rows = read(out, "parquet");
        assertEquals(20, rows.size(), "10 rows × 2 samples, none lost");
        assertEquals(10, summary.rows());
        assertEquals(8, summary.errors());
        Map<String, String> expected = Map.of(
                "empty-ids", "token_ids is empty",
                "oov", "token id 99999 at position 1 is outside the vocabulary [0, 512)",
                "empty-prompt", "prompt is empty",
                "nothing", "no prompt: token_ids, prompt and messages are all null",
                "too-long", "exceed the model's max_position_embeddings 2048",
                "bad-temp", "sampling parameters out of range",
                "no-messages", "messages is empty");
        for (var e : expected.entrySet()) {
            for (int smp = 0; smp < 2; smp++) {
                Generated g = rows.get(e.getKey() + "#" + smp);
                assertTrue(g.error() != null && g.error().contains(e.getValue()), e.getKey() + ": " + g.error());
                assertEquals("error", g.finishReason());
                assertNull(g.tokenIds());
            }
        }
        assertEquals("length", rows.get("good#0").finishReason());
        assertEquals("length", rows.get("chat#0").finishReason());
        assertEquals(4, rows.get("good#1").completionTokens());
        assertEquals(
                "id is null (input row bad.jsonl:9)",
                rows.get("null#0").error(),
                "a null id names the row's place in the input");
    }

    @Test
    void eosFromGenerationConfigAndStopStringsEndCompletions() throws Exception {
        Path model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"), List.of("{\"id\":\"a\",\"prompt\":\"The model is here and the\"}"));
        Spec free = new Spec(model, input, tmp.resolve("free"));
        free.maxNewTokens = 12;
        free.ignoreEos = true;
        free.run();
        Generated g = read(tmp.resolve("free"), "parquet").get("a#0");
        assertEquals(12, g.completionTokens());
        // The greedy third token as generation_config.json's EOS: the completion ends before its first occurrence.
        int eos = g.tokenIds().get(2);
        ObjectMapper json = new ObjectMapper();
        ObjectNode gc = (ObjectNode)
                json.readTree(model.resolve("generation_config.json").toFile());
        gc.put("eos_token_id", eos);
        json.writeValue(model.resolve("generation_config.json").toFile(), gc);
        Spec withEos = new Spec(model, input, tmp.resolve("eos"));
        withEos.maxNewTokens = 12;
        withEos.run();
        Generated e = read(tmp.resolve("eos"), "parquet").get("a#0");
        assertEquals("eos", e.finishReason());
        assertEquals(g.tokenIds().subList(0, g.tokenIds().indexOf(eos)), e.tokenIds());
        // A stop string from the middle of the free text: the text ends just before it.
        String text = g.completion();
        String stop = text.substring(text.length() / 2, text.length() / 2 + 2);
        Spec stopped = new Spec(model, input, tmp.resolve("stop"));
        stopped.maxNewTokens = 12;
        stopped.ignoreEos = true;
        stopped.stop = List.of(stop);
        stopped.run();
        Generated st = read(tmp.resolve("stop"), "parquet").get("a#0");
        assertEquals("stop", st.finishReason());
        assertEquals(text.substring(0, text.indexOf(stop)), st.completion());
    }

    @Test
    void resumeGeneratesOnlyTheMissingRowsAndJsonlCarriesTopLogprobs() throws IOException {
        List<String> lines = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            lines.add("{\"id\":" + i + ",\"token_ids\":[" + (i + 1) + "," + (2 * i + 3) + ",7]}");
        }
        Path out = tmp.resolve("out");
        Path in = SparkTests.writeJsonl(tmp.resolve("all/in.jsonl"), lines);
        Spec first = new Spec(demo, in, out);
        first.outputFormat = "jsonl";
        first.maxNewTokens = 5;
        first.topLogprobs = 3;
        first.run();
        // What an interrupted run leaves: its partial folder, marked unfinished, with one of two part files.
        Path partial = tmp.resolve("_out.scorch-partial");
        Files.move(out, partial);
        com.fasterxml.jackson.databind.ObjectMapper json = new com.fasterxml.jackson.databind.ObjectMapper();
        var marker = (com.fasterxml.jackson.databind.node.ObjectNode)
                json.readTree(partial.resolve("_scorch.json").toFile());
        json.writeValue(partial.resolve("_scorch.json").toFile(), marker.put("complete", false));
        Files.deleteIfExists(partial.resolve("._scorch.json.crc"));
        List<Path> parts;
        try (var files = Files.list(partial)) {
            parts = files.filter(p -> p.getFileName().toString().startsWith("part-"))
                    .sorted()
                    .toList();
        }
        assertEquals(2, parts.size());
        long kept;
        try (var l = Files.lines(parts.get(1))) {
            kept = l.filter(x -> !x.isBlank()).count();
        }
        Files.delete(parts.get(0));
        Files.deleteIfExists(partial.resolve("." + parts.get(0).getFileName() + ".crc"));

        Spec again = new Spec(demo, in, out);
        again.outputFormat = "jsonl";
        again.maxNewTokens = 5;
        again.topLogprobs = 3;
        again.resume = true;
        GenerateSummary s = again.run();
        assertEquals(kept, s.skippedByResume());
        assertEquals(8 - kept, s.rows());
        Map<String, Generated> rows = read(out, "jsonl");
        assertEquals(8, rows.size());
        assertTrue(Files.exists(out.resolve(parts.get(1).getFileName())), "the first run's kept file stays");
        Row r = SparkTests.spark()
                .read()
                .json(out.toString())
                .where("id = 5")
                .selectExpr(
                        "size(top_logprobs)",
                        "size(top_logprobs[0])",
                        "top_logprobs[0][0].token_id",
                        "completion_token_ids[0]",
                        "top_logprobs[0][0].logprob >= top_logprobs[0][1].logprob")
                .first();
        assertEquals(5, r.getInt(0), "one entry per generated token");
        assertEquals(3, r.getInt(1), "top 3");
        assertEquals(r.getLong(3), r.getLong(2), "greedy picks the most likely alternative");
        assertTrue(r.getBoolean(4), "alternatives ordered by log-prob");
    }
}
