package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.DemoModel;
import dev.scorch.jobs.ScorchCli;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** --model and --tokenizer take a file: URI wherever they take a folder, and a missing s3a connector is named. */
class ModelLocationTest {
    @TempDir
    static Path tmp;

    static Path model;
    static Path texts;

    @BeforeAll
    static void files() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 11).write(model);
        texts = Files.writeString(tmp.resolve("texts.jsonl"), "{\"id\":\"a\",\"prompt\":\"hello world\"}\n");
    }

    record Run(int exit, String out, String err) {}

    static Run cli(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        var cl = ScorchCli.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        return new Run(cl.execute(args), out.toString(), err.toString());
    }

    @Test
    void eachCommandTakesAFileUri() throws Exception {
        String uri = model.toUri().toString(); // file:///...
        assertEquals(model, DemoModel.resolve(uri), "score, generate and eval resolve --model so");
        assertEquals(model, DemoModel.resolve("file://" + model));

        Path ids = tmp.resolve("ids.jsonl");
        Run tok = cli(
                "tokenize",
                "--tokenizer",
                uri,
                "--input",
                Files.writeString(tmp.resolve("t.jsonl"), "{\"id\":1,\"text\":\"hi\"}\n")
                        .toUri()
                        .toString(),
                "--output",
                ids.toString());
        assertEquals(0, tok.exit(), tok.err());
        assertTrue(Files.readString(ids).contains("\"token_ids\""));

        Run inspect = cli("inspect", "--model", uri);
        assertEquals(0, inspect.exit(), inspect.err());

        Path out = tmp.resolve("scored");
        Run score = cli(
                "score",
                "--model",
                uri,
                "--input",
                texts.toString(),
                "--output",
                out.toString(),
                "--output-format",
                "jsonl",
                "--master",
                "local[1]");
        assertEquals(0, score.exit(), score.err());
    }

    @Test
    void s3aWithoutHadoopAwsNamesTheModelAndTheJar() {
        Run r = cli(
                "score",
                "--model",
                "s3a://bucket/models/K2",
                "--input",
                texts.toString(),
                "--output",
                tmp.resolve("never").toString(),
                "--master",
                "local[1]");
        assertEquals(2, r.exit(), r.err());
        assertTrue(r.err().contains("s3a://bucket/models/K2: "), r.err());
        assertTrue(r.err().contains("org.apache.hadoop:hadoop-aws:"), r.err());
        assertTrue(!r.err().contains("Exception:"), r.err());
    }
}
