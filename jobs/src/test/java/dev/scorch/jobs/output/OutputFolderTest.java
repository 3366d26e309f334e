package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Nothing the user wrote is deleted; an old output is replaced only when the new run commits. */
class OutputFolderTest {
    @TempDir
    Path tmp;

    FileSystem fs;
    Path out;

    @BeforeEach
    void setUp() throws IOException {
        fs = FileSystem.getLocal(new Configuration());
        out = tmp.resolve("out");
    }

    OutputFolder open(WriteMode mode) throws IOException {
        return OutputFolder.open(fs, out.toString(), "score", mode, null).start();
    }

    /** A run that writes one part file into its target. */
    static void writePart(OutputFolder f, String name, String rows) throws IOException {
        Files.writeString(Path.of(f.target().toUri()).resolve(name), rows);
    }

    @Test
    void aNewRunWritesBesideTheOutputAndAppearsOnlyWhenItCommits() throws IOException {
        OutputFolder f = open(WriteMode.NEW);
        assertEquals(
                tmp.resolve("_out.scorch-partial").toUri().getPath().replaceAll("/$", ""),
                f.target().toUri().getPath());
        writePart(f, "part-0", "a\n");
        assertFalse(Files.exists(out), "nothing at the output before the commit");
        f.commit();
        assertEquals("a\n", Files.readString(out.resolve("part-0")));
        assertTrue(Files.exists(out.resolve(OutputFolder.MARKER)));
        assertFalse(Files.exists(tmp.resolve("_out.scorch-partial")));
    }

    @Test
    void overwriteKeepsTheOldOutputUntilCommitAndAFailedRunLeavesItAsItWas() throws IOException {
        OutputFolder first = open(WriteMode.NEW);
        writePart(first, "part-0", "old\n");
        first.commit();

        OutputFolder failed = open(WriteMode.OVERWRITE);
        writePart(failed, "part-0", "new, never committed\n");
        assertEquals("old\n", Files.readString(out.resolve("part-0")), "the old output stands while the new run runs");
        // (the run dies here)
        assertThrows(
                IllegalArgumentException.class,
                () -> open(WriteMode.NEW),
                "an interrupted run is not silently dropped");

        OutputFolder again = open(WriteMode.OVERWRITE);
        assertFalse(
                Files.exists(Path.of(again.target().toUri()).resolve("part-0")),
                "--overwrite starts the partial run over");
        writePart(again, "part-1", "new\n");
        again.commit();
        assertEquals("new\n", Files.readString(out.resolve("part-1")));
        assertFalse(Files.exists(out.resolve("part-0")));
    }

    @Test
    void overwriteRefusesAFolderWithFilesScorchDidNotWrite() throws IOException {
        Files.createDirectories(out);
        Files.writeString(out.resolve("thesis.tex"), "years of work");
        String msg = assertThrows(IllegalArgumentException.class, () -> open(WriteMode.OVERWRITE))
                .getMessage();
        assertTrue(msg.contains("thesis.tex") && msg.contains("--force-overwrite"), msg);
        assertEquals("years of work", Files.readString(out.resolve("thesis.tex")));

        OutputFolder forced = open(WriteMode.OVERWRITE_ANY);
        assertEquals(
                "years of work",
                Files.readString(out.resolve("thesis.tex")),
                "even forced, nothing goes before the commit");
        writePart(forced, "part-0", "x\n");
        forced.commit();
        assertFalse(Files.exists(out.resolve("thesis.tex")));
    }

    @Test
    void aFileIsNotAnOutputFolder() throws IOException {
        Files.writeString(out, "data");
        assertThrows(IllegalArgumentException.class, () -> open(WriteMode.OVERWRITE));
        assertEquals("data", Files.readString(out));
    }

    @Test
    void sparkOutputWrittenBeforeTheMarkerIsScorchs() throws IOException {
        Files.createDirectories(out);
        Files.writeString(out.resolve("part-00000-abc.snappy.parquet"), "p");
        Files.writeString(out.resolve(".part-00000-abc.snappy.parquet.crc"), "c");
        Files.writeString(out.resolve("_SUCCESS"), "");
        OutputFolder f = open(WriteMode.OVERWRITE);
        writePart(f, "part-0", "x\n");
        f.commit();
        assertFalse(Files.exists(out.resolve("_SUCCESS")));
    }

    @Test
    void resumeFinishesAPartialRunOrAddsToAFinishedOutput() throws IOException {
        OutputFolder killed = open(WriteMode.NEW);
        writePart(killed, "part-0", "slice 0\n");
        OutputFolder resumed = open(WriteMode.RESUME);
        assertTrue(resumed.resumesRows());
        assertEquals(killed.target(), resumed.target());
        writePart(resumed, "part-1", "slice 1\n");
        resumed.commit();
        assertEquals("slice 0\n", Files.readString(out.resolve("part-0")));
        assertEquals("slice 1\n", Files.readString(out.resolve("part-1")));

        OutputFolder more = open(WriteMode.RESUME);
        assertEquals(
                fs.makeQualified(new org.apache.hadoop.fs.Path(out.toString())),
                more.target(),
                "a finished output is resumed in place");
        more.commit();
        assertTrue(Files.exists(out.resolve("part-1")));
    }

    @Test
    void resumeRefusesAnotherJobsOutput() throws IOException {
        OutputFolder g = OutputFolder.open(fs, out.toString(), "generate", WriteMode.NEW, null)
                .start();
        g.commit();
        String msg = assertThrows(IllegalArgumentException.class, () -> open(WriteMode.RESUME))
                .getMessage();
        assertTrue(msg.contains("generate output"), msg);
    }

    @Test
    void aSwapCutShortIsPutRight() throws IOException {
        OutputFolder first = open(WriteMode.NEW);
        writePart(first, "part-0", "old\n");
        first.commit();
        // Killed between the swap's renames, before the new run was complete: the old output comes back.
        OutputFolder next = open(WriteMode.OVERWRITE);
        writePart(next, "part-0", "new\n");
        Files.move(out, tmp.resolve("_out.scorch-replaced"));
        OutputFolder.finishInterruptedSwap(fs, fs.makeQualified(new org.apache.hadoop.fs.Path(out.toString())));
        assertEquals("old\n", Files.readString(out.resolve("part-0")));
        assertFalse(Files.exists(tmp.resolve("_out.scorch-replaced")));
    }

    @Test
    void claimTakesOnlyAnAbsentEmptyOrOwnFolder() throws IOException {
        Pattern names = Pattern.compile("runs|history|_scorch\\.json|\\._scorch\\.json\\.crc");
        Path evals = tmp.resolve("evals");
        OutputFolder.claim(fs, evals.toString(), "eval", names);
        Files.createDirectories(evals.resolve("runs"));
        OutputFolder.claim(fs, evals.toString(), "eval", names);
        Path mine = Files.createDirectories(tmp.resolve("mine"));
        Files.writeString(mine.resolve("notes.txt"), "mine");
        assertThrows(IllegalArgumentException.class, () -> OutputFolder.claim(fs, mine.toString(), "eval", names));
        assertFalse(Files.exists(mine.resolve(OutputFolder.MARKER)));
    }
}
