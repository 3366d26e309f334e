package dev.scorch.jobs.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.CliRun;
import dev.scorch.jobs.DemoModel;
import java.io.IOException;
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

    @Test
    void eachCommandTakesAFileUri() throws Exception {
        String uri = model.toUri().toString(); // file:///...
        assertEquals(model, DemoModel.resolve(uri), "score, generate and eval resolve --model so");
        assertEquals(model, DemoModel.resolve("file://" + model));

        Path ids = tmp.resolve("ids.jsonl");
        CliRun tok = CliRun.of(
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

        CliRun inspect = CliRun.of("inspect", "--model", uri);
        assertEquals(0, inspect.exit(), inspect.err());

        Path out = tmp.resolve("scored");
        CliRun score = CliRun.of(
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
        CliRun r = CliRun.of(
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
