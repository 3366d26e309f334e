package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.score.SparkTests;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sampled generate_until with repeats, end to end on the demo model (local[2]): a task sampled 3 times per document
 * (do_sample, temperature 1) under four filter pipelines (take_first; majority_vote then take_first; two regexes over
 * every repeat, one that never matches) and a greedy task repeated twice, run with --seed 5 twice and --seed 6 once.
 * The same seed gives the same samples, another seed others; the filtered responses and exact_match are worked out
 * here from the logged responses.
 */
class LmEvalSamplingTest {
    static final ObjectMapper OM = new ObjectMapper();

    @TempDir
    static Path tmp;

    static Path tasks;
    static Path seed5;
    static Path seed5Again;
    static Path seed6;

    @BeforeAll
    static void runThrice() throws Exception {
        SparkTests.spark();
        tasks = tmp.resolve("tasks");
        Files.createDirectories(tasks);
        Files.writeString(
                tasks.resolve("gen.jsonl"),
                "{\"q\": \"Say a word.\", \"a\": \"none\"}\n{\"q\": \"Name a letter.\", \"a\": \"e\"}\n");
        String common = """
                dataset_path: json
                dataset_kwargs:
                  data_files:
                    test: gen.jsonl
                test_split: test
                output_type: generate_until
                doc_to_text: "Q: {{q}}\\nA:"
                doc_to_target: a
                """;
        Files.writeString(tasks.resolve("gen_sampled.yaml"), "task: gen_sampled\n" + common + """
                repeats: 3
                generation_kwargs: {until: ["\\n"], max_gen_toks: 4, do_sample: true, temperature: 1.0}
                filter_list:
                  - name: first
                    filter: [{function: take_first}]
                  - name: vote
                    filter: [{function: majority_vote}, {function: take_first}]
                  - name: each
                    filter: [{function: regex, regex_pattern: "([aeiou])", fallback: "none"}]
                  - name: never
                    filter: [{function: regex, regex_pattern: '([^\\s\\S])', fallback: "none"}]
                """);
        Files.writeString(tasks.resolve("gen_greedy.yaml"), "task: gen_greedy\n" + common + """
                repeats: 2
                generation_kwargs: {until: ["\\n"], max_gen_toks: 4}
                """);
        seed5 = run("seed5", "5");
        seed5Again = run("seed5-again", "5");
        seed6 = run("seed6", "6");
    }

    static Path run(String name, String seed) {
        Path out = tmp.resolve(name);
        CliRun r = CliRun.of(
                "lm-eval",
                "--model",
                "demo",
                "--tasks",
                "gen_sampled,gen_greedy",
                "--include_path",
                tasks.toString(),
                "--output_path",
                out.toString(),
                "--log_samples",
                "--seed",
                seed);
        assertEquals(0, r.exit(), r.err());
        return out;
    }

    /** The samples of a task by filter, in document order. */
    static Map<String, List<JsonNode>> samples(Path out, String task) throws Exception {
        Map<String, List<JsonNode>> byFilter = new LinkedHashMap<>();
        try (Stream<Path> s = Files.list(out)) {
            Path f = s.filter(p -> p.getFileName().toString().startsWith("samples_" + task + "_"))
                    .findFirst()
                    .orElseThrow();
            for (String line : Files.readAllLines(f, StandardCharsets.UTF_8)) {
                JsonNode n = OM.readTree(line);
                byFilter.computeIfAbsent(n.get("filter").asText(), k -> new ArrayList<>())
                        .add(n);
            }
        }
        return byFilter;
    }

    static List<List<String>> resps(Path out, String task) throws Exception {
        List<List<String>> all = new ArrayList<>();
        for (JsonNode n : samples(out, task).values().iterator().next()) {
            List<String> r = new ArrayList<>();
            n.get("resps").get(0).forEach(x -> r.add(x.asText()));
            all.add(r);
        }
        return all;
    }

    static JsonNode results(Path out) throws Exception {
        try (Stream<Path> s = Files.list(out)) {
            return OM.readTree(s.filter(p -> p.getFileName().toString().startsWith("results_"))
                    .findFirst()
                    .orElseThrow()
                    .toFile());
        }
    }

    @Test
    void theSameSeedSamplesTheSameTextsAnotherSeedOthers() throws Exception {
        List<List<String>> a = resps(seed5, "gen_sampled");
        assertEquals(2, a.size());
        for (List<String> doc : a) {
            assertEquals(3, doc.size(), "one response per repeat: " + doc);
        }
        assertEquals(a, resps(seed5Again, "gen_sampled"));
        assertNotEquals(a, resps(seed6, "gen_sampled"));
        // the repeats are separate draws, not one text copied
        assertTrue(a.stream().anyMatch(doc -> doc.stream().distinct().count() > 1), a.toString());
        assertEquals(
                true,
                results(seed5)
                        .get("configs")
                        .get("gen_sampled")
                        .get("generation_kwargs")
                        .get("do_sample")
                        .asBoolean());
    }

    @Test
    void greedyRepeatsAreOneTextWhateverTheSeed() throws Exception {
        List<List<String>> g = resps(seed5, "gen_greedy");
        for (List<String> doc : g) {
            assertEquals(2, doc.size());
            assertEquals(doc.get(0), doc.get(1));
        }
        assertEquals(g, resps(seed6, "gen_greedy"));
    }

    @Test
    void filtersApplyToEveryRepeatAndExactMatchFollows() throws Exception {
        Map<String, List<JsonNode>> byFilter = samples(seed5, "gen_sampled");
        assertEquals(List.of("first", "vote", "each", "never"), new ArrayList<>(byFilter.keySet()));
        List<List<String>> resps = resps(seed5, "gen_sampled");
        Map<String, Pattern> patterns =
                Map.of("each", Pattern.compile("([aeiou])"), "never", Pattern.compile("([^\\s\\S])"));
        Map<String, Double> means = new LinkedHashMap<>();
        for (var e : byFilter.entrySet()) {
            double sum = 0;
            for (int d = 0; d < resps.size(); d++) {
                List<String> r = resps.get(d);
                JsonNode sample = e.getValue().get(d);
                String target = sample.get("target").asText();
                double em;
                switch (e.getKey()) {
                    case "first" -> {
                        assertEquals(
                                r.get(0), sample.get("filtered_resps").get(0).asText());
                        em = r.get(0).equals(target) ? 1 : 0;
                    }
                    case "vote" -> {
                        String vote = r.get(0);
                        long best = 0;
                        for (String x : r) { // the most frequent, the first seen on a tie
                            long c = r.stream().filter(x::equals).count();
                            if (c > best) {
                                best = c;
                                vote = x;
                            }
                        }
                        assertEquals(vote, sample.get("filtered_resps").get(0).asText());
                        em = vote.equals(target) ? 1 : 0;
                    }
                    default -> {
                        List<String> each = new ArrayList<>();
                        for (String x : r) {
                            Matcher m = patterns.get(e.getKey()).matcher(x);
                            each.add(m.find() ? m.group(1) : "none");
                        }
                        List<String> logged = new ArrayList<>();
                        sample.get("filtered_resps").get(0).forEach(x -> logged.add(x.asText()));
                        assertEquals(each, logged);
                        em = each.stream().filter(target::equals).count() / 3.0; // the fraction of repeats
                    }
                }
                assertEquals(em, sample.get("exact_match").asDouble(), 1e-12, e.getKey() + " doc " + d);
                sum += em;
            }
            means.put(e.getKey(), sum / resps.size());
        }
        // no response matches "never": all three repeats fall back to "none", document 0's target
        assertEquals(0.5, means.get("never"));
        JsonNode r = results(seed5).get("results").get("gen_sampled");
        for (var e : means.entrySet()) {
            assertEquals(e.getValue(), r.get("exact_match," + e.getKey()).asDouble(), 1e-12, e.getKey());
        }
    }
}
