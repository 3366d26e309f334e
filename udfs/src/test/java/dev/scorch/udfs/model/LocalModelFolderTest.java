package dev.scorch.udfs.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.scorch.engine.checkpoint.CheckpointException;
import dev.scorch.engine.checkpoint.ModelManifest;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Assembling a model folder in an executor's cache: verified, published atomically, and a lost race is harmless. */
class LocalModelFolderTest {
    @TempDir
    static Path tmp;

    static Path model;
    static ModelManifest manifest;

    @BeforeAll
    static void writeModel() throws IOException {
        model = tmp.resolve("model");
        new DemoModelWriter(DemoPreset.TINY, false, true, 5).write(model);
        manifest = ModelManifest.of(model);
    }

    /** A filled temporary folder, as BroadcastSource or SharedPathSource leave it before publishing. */
    static Path assembled(Path cacheRoot) throws IOException {
        Path t = LocalModelFolder.fresh(ModelCache.of(cacheRoot), manifest);
        assertTrue(t.getFileName().toString().startsWith(manifest.contentHash() + ".partial-"), t.toString());
        for (ModelManifest.FileEntry e : manifest.files()) {
            Files.copy(model.resolve(e.name()), t.resolve(e.name()));
        }
        return t;
    }

    @Test
    void publishMovesTheVerifiedFolderIntoPlace() throws IOException {
        Path root = tmp.resolve("cache-1");
        Path dir = root.resolve(manifest.contentHash());
        Path t = assembled(root);
        assertEquals(dir, LocalModelFolder.publish(t, dir, manifest));
        assertFalse(Files.exists(t));
        assertEquals(manifest.contentHash(), Files.readString(dir.resolve(LocalModelFolder.COMPLETE)));
        manifest.verify(dir);
    }

    /** Two executor JVMs on one host assemble the same model: the second rename hits a non-empty folder (ENOTEMPTY). */
    @Test
    void losingThePublishRaceToAnotherJvmIsHarmless() throws IOException {
        Path root = tmp.resolve("cache-2");
        Path dir = root.resolve(manifest.contentHash());
        Path first = assembled(root);
        Path second = assembled(root);
        assertEquals(dir, LocalModelFolder.publish(first, dir, manifest));
        assertEquals(dir, LocalModelFolder.publish(second, dir, manifest), "the loser uses the winner's folder");
        assertFalse(Files.exists(second), "the loser's copy is dropped");
        manifest.verify(dir);
    }

    @Test
    void anIncompleteFolderInTheWayIsAnError() throws IOException {
        Path root = tmp.resolve("cache-3");
        Path dir = root.resolve(manifest.contentHash());
        Files.createDirectories(dir);
        Files.writeString(dir.resolve("junk"), "x"); // no completion marker
        Path t = assembled(root);
        assertThrows(IOException.class, () -> LocalModelFolder.publish(t, dir, manifest));
    }

    @Test
    void aCorruptFileIsNotPublished() throws IOException {
        Path root = tmp.resolve("cache-4");
        Path dir = root.resolve(manifest.contentHash());
        Path t = assembled(root);
        Path shard = t.resolve(manifest.files().get(manifest.files().size() - 1).name());
        byte[] b = Files.readAllBytes(shard);
        b[b.length / 2] ^= 1;
        Files.write(shard, b);
        CheckpointException e =
                assertThrows(CheckpointException.class, () -> LocalModelFolder.publish(t, dir, manifest));
        assertTrue(e.getMessage().contains("checksum"), e.getMessage());
        assertFalse(Files.exists(dir));
    }
}
