package dev.scorch.jobs.output;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The outputs the hostile-input review found deleting a user's files, each refused with a reason. */
class PathGuardTest {
    @TempDir
    Path tmp;

    Path home;
    Path work;
    Path data;
    Path inputFile;
    Path model;
    FileSystem fs;

    @BeforeEach
    void files() throws IOException {
        home = Files.createDirectories(tmp.resolve("home/me"));
        work = Files.createDirectories(home.resolve("project"));
        data = Files.createDirectories(work.resolve("data"));
        inputFile = Files.writeString(data.resolve("prompts.jsonl"), "{}\n");
        model = Files.createDirectories(tmp.resolve("models/k2"));
        fs = FileSystem.getLocal(new Configuration());
    }

    PathGuard guard(String input) {
        return new PathGuard(fs, home, work).input("the input", input).input("the model folder", model);
    }

    String refused(String input, String output) {
        return assertThrows(IllegalArgumentException.class, () -> guard(input).check("--output", output))
                .getMessage();
    }

    @Test
    void theInputItsFolderAndWhatContainsThemAreRefused() {
        assertTrue(refused(inputFile.toString(), inputFile.toString()).contains("is the input"));
        assertTrue(refused(data.toString(), data.toString()).contains("is the input"));
        assertTrue(refused(inputFile.toString(), data.toString()).contains("contains the input"));
        assertTrue(refused(data.toString(), data.resolve("scores").toString()).contains("lies inside the input"));
        // A glob keeps the folder its pattern starts in.
        assertTrue(
                refused(data + "/*.jsonl", data.resolve("out.jsonl").toString()).contains("lies inside the input"));
    }

    @Test
    void theModelFolderIsRefused() {
        assertTrue(refused(inputFile.toString(), model.toString()).contains("is the model folder"));
        assertTrue(refused(inputFile.toString(), model.resolve("out").toString())
                .contains("lies inside the model folder"));
        assertTrue(refused(inputFile.toString(), model.getParent().toString()).contains("contains the model folder"));
    }

    @Test
    void dotDotAndLinksAreResolvedBeforeComparing() throws IOException {
        Files.createDirectories(data.resolve("sub"));
        assertTrue(refused(inputFile.toString(), data + "/sub/..").contains("contains the input"));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), data);
        assertTrue(refused(inputFile.toString(), link.toString()).contains("contains the input"));
        assertTrue(refused(link.resolve("prompts.jsonl").toString(), inputFile.toString())
                .contains("is the input"));
    }

    @Test
    void rootHomeAndWorkingFolderAndWhatContainsThemAreRefused() throws IOException {
        String elsewhere =
                Files.writeString(tmp.resolve("elsewhere.jsonl"), "{}\n").toString();
        assertTrue(refused(elsewhere, "/").contains("root"));
        assertTrue(refused(elsewhere, home.toString()).contains("is the home folder"));
        assertTrue(refused(elsewhere, home.getParent().toString()).contains("contains the home folder"));
        assertTrue(refused(elsewhere, work.toString()).contains("is the working folder"));
        assertTrue(refused(elsewhere, work + "/.").contains("is the working folder"));
        assertTrue(refused(elsewhere, work.resolve("out/../..").toString()).contains("is the home folder"));
    }

    @Test
    void outputsBesideOrBelowTheWorkingFolderAreFine() {
        assertDoesNotThrow(() -> guard(inputFile.toString())
                .check("--output", work.resolve("out/scores").toString()));
        assertDoesNotThrow(() -> guard(inputFile.toString())
                .check("--output", home.resolve("results").toString()));
        assertDoesNotThrow(
                () -> guard(data.toString())
                        .check("--output", work.resolve("data-scores").toString()),
                "a name that only starts like the input's");
    }
}
