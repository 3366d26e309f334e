package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.jobs.CliRun;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Nothing that is not a regular file or a folder is ever replaced or deleted: device nodes, FIFOs and symbolic links,
 * at the output path or inside a folder an overwrite would delete, even with --force-overwrite.
 */
class SpecialFilesTest {
    @TempDir
    static Path tmp;

    static Path model;
    static Path texts;

    @BeforeAll
    static void files() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 7).write(model);
        texts = Files.writeString(tmp.resolve("texts.jsonl"), "{\"id\":1,\"text\":\"hello world\"}\n");
    }

    static CliRun tokenize(Path out) {
        return CliRun.of(
                "tokenize",
                "--tokenizer",
                model.toString(),
                "--input",
                texts.toString(),
                "--output",
                out.toString(),
                "--overwrite",
                "--force-overwrite");
    }

    static BasicFileAttributes kind(Path p) throws IOException {
        return Files.readAttributes(p, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
    }

    static Path fifo(Path p) throws Exception {
        Files.createDirectories(p.getParent());
        Process mk = new ProcessBuilder("mkfifo", p.toString()).inheritIO().start();
        assumeTrue(mk.waitFor() == 0, "mkfifo is needed");
        assertTrue(kind(p).isOther());
        return p;
    }

    @Test
    void tokenizeNeverReplacesADeviceNode() throws Exception {
        // A twin of /dev/null (character device 1,3) of the test's own: a regression replaces it, never the system's.
        Path dev = tmp.resolve("dev/null");
        Files.createDirectories(dev.getParent());
        Process mk = new ProcessBuilder("mknod", "-m", "666", dev.toString(), "c", "1", "3")
                .redirectErrorStream(true)
                .start();
        assumeTrue(mk.waitFor() == 0 && Files.exists(dev), "mknod needs root");
        assertTrue(kind(dev).isOther());
        CliRun.assertRefused(tokenize(dev), "is a device, FIFO or socket");
        assertTrue(kind(dev).isOther(), "the device node is still a device");
        assertFalse(Files.exists(tmp.resolve("dev/_null.scorch-lease")), "nothing written beside it");
    }

    @Test
    void tokenizeNeverReplacesAFifoOrALinkToADevice() throws Exception {
        Path f = fifo(tmp.resolve("tok/ids.fifo"));
        CliRun.assertRefused(tokenize(f), "is a device, FIFO or socket");
        assertTrue(kind(f).isOther(), "the FIFO is still there");

        Path link = Files.createSymbolicLink(tmp.resolve("tok/null-link.jsonl"), Path.of("/dev/null"));
        CliRun.assertRefused(tokenize(link), "is a symbolic link");
        assertTrue(kind(link).isSymbolicLink(), "the link is still there");
    }

    @Test
    void tokenizeStillReplacesItsOwnRegularFile() throws Exception {
        Path out = tmp.resolve("tok/ids.jsonl");
        assertEquals(0, tokenize(out).exit());
        assertEquals(0, tokenize(out).exit());
        assertTrue(Files.readString(out).contains("\"token_ids\""));
    }

    @Test
    void scoreNeverReplacesAFifoOrALinkAsItsOutput() throws Exception {
        Path f = fifo(tmp.resolve("score/out"));
        CliRun r = CliRun.of(
                "score",
                "--model",
                model.toString(),
                "--input",
                texts.toString(),
                "--output",
                f.toString(),
                "--overwrite",
                "--force-overwrite",
                "--master",
                "local[2]");
        CliRun.assertRefused(r, "is a device, FIFO or socket");
        assertTrue(kind(f).isOther());
        assertFalse(Files.exists(tmp.resolve("score/_out.scorch-lease")));
    }

    @Test
    void anOverwriteNeverDeletesAFolderThatHoldsAFifoOrALink() throws Exception {
        FileSystem fs = FileSystem.getLocal(new Configuration());
        Path out = tmp.resolve("mixed/out");
        Files.createDirectories(out);
        Files.writeString(out.resolve("part-00000.json"), "{}\n");
        Path f = fifo(out.resolve("sub/pipe"));
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> OutputFolder.open(fs, out.toString(), "score", WriteMode.OVERWRITE_ANY, null));
        assertTrue(e.getMessage().contains("pipe"), e.getMessage());
        assertTrue(kind(f).isOther(), "the FIFO is still there");

        Files.delete(f);
        Path link = Files.createSymbolicLink(out.resolve("elsewhere"), tmp);
        e = assertThrows(
                IllegalArgumentException.class,
                () -> OutputFolder.open(fs, out.toString(), "score", WriteMode.OVERWRITE_ANY, null));
        assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
        assertTrue(Files.isSymbolicLink(link));

        // A stale partial folder holding a FIFO is not deleted either, when a new run starts.
        Files.delete(link);
        Path partialPipe = fifo(tmp.resolve("mixed/_out.scorch-partial/pipe"));
        e = assertThrows(
                IllegalArgumentException.class,
                () -> OutputFolder.open(fs, out.toString(), "score", WriteMode.OVERWRITE_ANY, null));
        assertTrue(kind(partialPipe).isOther());
    }

    @Test
    void aLinkAsTheOutputFolderIsNotReplacedByAFolder() throws Exception {
        FileSystem fs = FileSystem.getLocal(new Configuration());
        Path target = Files.createDirectories(tmp.resolve("real-out"));
        Path link = Files.createSymbolicLink(tmp.resolve("linked-out"), target);
        IllegalArgumentException e = assertThrows(
                IllegalArgumentException.class,
                () -> OutputFolder.open(fs, link.toString(), "score", WriteMode.OVERWRITE_ANY, null));
        assertTrue(e.getMessage().contains("give the link's target itself"), e.getMessage());
        assertTrue(Files.isSymbolicLink(link));
    }
}
