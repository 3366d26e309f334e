package dev.scorch.jobs.score;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.kernels.CpuOps;
import dev.scorch.engine.model.DeepseekV3Model;
import dev.scorch.engine.scoring.LogitsMode;
import dev.scorch.engine.scoring.ScoreRequest;
import dev.scorch.engine.scoring.Scorer;
import dev.scorch.engine.scoring.SequenceScore;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.ScorchCli;
import dev.scorch.jobs.score.SparkTests.Scored;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Text rows: tokenised on the executors with the checkpoint's own tokenizer; a continuation scores only its tokens. */
class ScoreJobTextRowsTest {
    @TempDir
    Path tmp;

    @Test
    void promptAndContinuationRowsMatchTheEngineOnTheSameTokens() throws Exception {
        Path model = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4242).write(model);
        Path input = SparkTests.writeJsonl(
                tmp.resolve("in.jsonl"),
                List.of(
                        "{\"id\":\"a\",\"prompt\":\"What is the capital of France?\",\"continuation\":\" Paris is the capital of France.\"}",
                        "{\"id\":\"b\",\"prompt\":\"The quick brown fox jumps over the lazy dog.\"}",
                        "{\"id\":\"c\",\"prompt\":\"Ünïcödé and emoji 🚀 still tokenise byte by byte.\"}",
                        "{\"id\":\"d\",\"prompt\":\"\"}",
                        "{\"id\":\"e\",\"prompt\":\"x\",\"continuation\":\"\"}"));
        Path out = tmp.resolve("out");
        SparkTests.spec(model, input, out).outputFormat("jsonl").run();
        Map<String, Scored> rows = SparkTests.readOutput(out, "jsonl");
        assertEquals(5, rows.size());
        assertEquals("prompt is empty", rows.get("d").error());
        assertEquals("continuation is empty", rows.get("e").error());

        // The same texts tokenised and scored by the engine directly.
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        DeepseekV3Model m = DeepseekV3Model.load(model);
        try (CpuOps ops = new CpuOps(1)) {
            Scorer scorer = new Scorer(m.on(ops));
            int[] prompt = tok.encode("What is the capital of France?", true);
            int[] cont = tok.encode(" Paris is the capital of France.", false);
            SequenceScore a = scorer.score(List.of(ScoreRequest.continuation(prompt, cont, 0, LogitsMode.NONE)))
                    .get(0);
            Scored sa = rows.get("a");
            assertNull(sa.error());
            assertEquals(prompt.length + cont.length, sa.numTokens());
            assertEquals(m.config().bosTokenId(), sa.tokenIds().get(0), "the prompt starts with BOS");
            for (int k = 0; k < sa.numTokens(); k++) {
                if (k < prompt.length) {
                    assertNull(sa.tokenLogprobs().get(k), "prompt token " + k + " is not scored");
                } else {
                    assertEquals(a.tokenLogprobs()[k], sa.tokenLogprobs().get(k), 0f, "continuation token " + k);
                }
            }
            assertEquals(a.sumLogprob(), sa.sum(), 0.0);
            int[] b = tok.encode("The quick brown fox jumps over the lazy dog.", true);
            SequenceScore sb = scorer.score(List.of(ScoreRequest.of(b))).get(0);
            assertEquals(sb.sumLogprob(), rows.get("b").sum(), 0.0);
            assertEquals(b.length, rows.get("b").numTokens());
            assertNull(rows.get("c").error());
        }
    }

    @Test
    void textRowsOfAModelWithoutTokenizerGetAnError() throws Exception {
        Path input = SparkTests.writeJsonl(tmp.resolve("in.jsonl"), List.of("{\"id\":\"a\",\"prompt\":\"hello\"}"));
        Path out = tmp.resolve("out");
        SparkTests.spec(SparkTests.conformanceModel(), input, out)
                .outputFormat("jsonl")
                .run();
        String err = SparkTests.readOutput(out, "jsonl").get("a").error();
        assertTrue(err.contains("needs a tokenizer"), err);
    }

    @Test
    void tokenizeCommandWritesIdsAndErrorsPerLine() throws Exception {
        Path model = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4243).write(model);
        Path in = SparkTests.writeJsonl(
                tmp.resolve("texts.jsonl"),
                List.of(
                        "{\"id\":1,\"text\":\"The model is here.\"}",
                        "{\"id\":2,\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}",
                        "{\"id\":3,\"nothing\":true}"));
        Path outFile = tmp.resolve("ids.jsonl");
        int rc = ScorchCli.commandLine()
                .execute(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        in.toString(),
                        "--output",
                        outFile.toString(),
                        "--add-special-tokens");
        assertEquals(0, rc);
        List<String> lines = Files.readAllLines(outFile);
        assertEquals(3, lines.size());
        Tokenizer tok = Tokenizers.load(model).orElseThrow();
        StringBuilder ids = new StringBuilder();
        for (int id : tok.encode("The model is here.", true)) {
            ids.append(ids.length() == 0 ? "" : ",").append(id);
        }
        assertTrue(lines.get(0).contains("\"token_ids\":[" + ids + "]"), lines.get(0));
        String rendered = tok.chatTemplate()
                .orElseThrow()
                .render(List.of(new dev.scorch.engine.tokenizer.ChatTemplate.Message("user", "Hello")), true);
        assertTrue(lines.get(1).contains("\"num_tokens\":" + tok.encode(rendered, false).length), lines.get(1));
        assertTrue(lines.get(2).contains("\"error\""), lines.get(2));
    }

    /** An empty CSV prompt is its row's error, named as such, in its one output row; the other rows score. */
    @Test
    void emptyCsvPromptIsItsRowsError() throws Exception {
        Path model = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4245).write(model);
        Path in = Files.createDirectories(tmp.resolve("csv")).resolve("in.csv");
        Files.writeString(in, "id,prompt\na,hello there\nb,\nc,\"\"\nd,more text\n");
        Path out = tmp.resolve("csv-out");
        SparkTests.spec(model, in, out).inputFormat("csv").outputFormat("jsonl").run();
        Map<String, Scored> rows = SparkTests.readOutput(out, "jsonl");
        assertEquals(4, rows.size(), rows.toString());
        assertEquals(null, rows.get("a").error());
        assertEquals(null, rows.get("d").error());
        assertTrue(
                rows.get("b").error().startsWith("prompt is empty (input row in.csv:"),
                rows.get("b").error());
        assertTrue(
                rows.get("c").error().startsWith("prompt is empty"),
                rows.get("c").error());
    }

    /** A line that is not JSON, or has no text, gets an error naming its file:line (and id where it has one). */
    @Test
    void tokenizeErrorsNameFileLineAndId() throws Exception {
        Path model = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 4244).write(model);
        Path in = SparkTests.writeJsonl(
                tmp.resolve("bad.jsonl"),
                List.of("{\"id\":1,\"text\":\"fine\"}", "this is not json", "[1,2]", "{\"id\":\"r4\",\"nothing\":1}"));
        Path outFile = tmp.resolve("bad-ids.jsonl");
        int rc = ScorchCli.commandLine()
                .execute(
                        "tokenize",
                        "--tokenizer",
                        model.toString(),
                        "--input",
                        in.toString(),
                        "--output",
                        outFile.toString());
        assertEquals(0, rc);
        List<String> lines = Files.readAllLines(outFile);
        assertEquals(4, lines.size());
        assertTrue(lines.get(1).contains("\"id\":\"bad.jsonl:2\""), lines.get(1));
        assertTrue(lines.get(1).contains("\"error\":\"bad.jsonl:2: not valid JSON"), lines.get(1));
        assertTrue(lines.get(2).contains("\"error\":\"bad.jsonl:3: not a JSON object"), lines.get(2));
        assertTrue(lines.get(3).contains("\"id\":\"r4\""), lines.get(3));
        assertTrue(lines.get(3).contains("bad.jsonl:4 (id \\\"r4\\\"): neither"), lines.get(3));
    }
}
