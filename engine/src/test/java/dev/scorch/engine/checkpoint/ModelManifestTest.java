package dev.scorch.engine.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.demo.DemoModelWriter;
import dev.scorch.engine.demo.DemoPreset;
import dev.scorch.engine.model.ModelInfo;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.zip.GZIPOutputStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The manifest lists (so ships, verifies and hashes) every file a model load reads: the shards and configs, and every
 * file the tokenizer is built from, chat_template.jinja included.
 */
class ModelManifestTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String JINJA = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
            + "{% if add_generation_prompt %}[assistant] {% endif %}";

    @TempDir
    static Path tmp;

    static Path demo;

    @BeforeAll
    static void demoModel() throws IOException {
        demo = tmp.resolve("demo");
        new DemoModelWriter(DemoPreset.TINY, false, true, 77).write(demo);
    }

    /** A copy of the demo folder whose chat template is chat_template.jinja (tokenizer_config.json has none). */
    private static Path withJinja(String name, String template) throws IOException {
        Path dir = tmp.resolve(name);
        Files.createDirectories(dir);
        try (var s = Files.list(demo)) {
            for (Path p : s.toList()) {
                Files.copy(p, dir.resolve(p.getFileName()));
            }
        }
        ObjectNode cfg =
                (ObjectNode) JSON.readTree(dir.resolve("tokenizer_config.json").toFile());
        cfg.remove("chat_template");
        JSON.writeValue(dir.resolve("tokenizer_config.json").toFile(), cfg);
        Files.writeString(dir.resolve("chat_template.jinja"), template);
        return dir;
    }

    private static List<String> names(ModelManifest m) {
        return m.files().stream().map(ModelManifest.FileEntry::name).toList();
    }

    @Test
    void theManifestListsExactlyTheFilesATokenizerIsBuiltFrom() {
        Set<String> tokenizer = new HashSet<>(Tokenizers.PRIMARY_FILES);
        tokenizer.addAll(Tokenizers.EXTRA_FILES);
        assertEquals(tokenizer, new HashSet<>(ModelFiles.TOKENIZER));
        assertEquals(ModelFiles.TOKENIZER.size(), tokenizer.size());
    }

    @Test
    void chatTemplateFileIsListedAndHashed() throws IOException {
        Path a = withJinja("jinja-a", JINJA);
        Path b = withJinja("jinja-b", JINJA.replace("[assistant]", "[bot]"));
        ModelManifest ma = ModelManifest.of(a);
        assertTrue(names(ma).contains("chat_template.jinja"), names(ma).toString());
        assertNotEquals(
                ma.contentHash(), ModelManifest.of(b).contentHash(), "another chat template, another model hash");
        assertEquals(
                ma.contentHash(),
                ModelManifest.of(withJinja("jinja-a2", JINJA)).contentHash(),
                "the same files, the same hash");
    }

    @Test
    void aFolderOfTheManifestsFilesLoadsTheSameTokenizerAndChat() throws IOException {
        Path src = withJinja("full", JINJA);
        // The gzipped tokenizer.json, which Tokenizers.load also takes, in place of the plain one.
        try (OutputStream out = new GZIPOutputStream(Files.newOutputStream(src.resolve("tokenizer.json.gz")))) {
            out.write(Files.readAllBytes(src.resolve("tokenizer.json")));
        }
        Files.delete(src.resolve("tokenizer.json"));
        Files.writeString(src.resolve("README.md"), "not read by a model load");
        ModelManifest m = ModelManifest.of(src);
        assertTrue(
                names(m).containsAll(List.of(
                        "config.json",
                        "generation_config.json",
                        Checkpoint.INDEX,
                        "tokenizer.json.gz",
                        "tokenizer_config.json",
                        "chat_template.jinja")),
                names(m).toString());
        assertTrue(!names(m).contains("README.md"), names(m).toString());
        assertEquals("tokenizer.json.gz", ModelInfo.of(src).tokenizer(), "inspect names the tokenizer the load reads");

        // What a shipped copy holds: the manifest's files and nothing else.
        Path shipped = Files.createDirectories(tmp.resolve("shipped"));
        for (ModelManifest.FileEntry e : m.files()) {
            Files.copy(src.resolve(e.name()), shipped.resolve(e.name()));
        }
        m.verify(shipped);
        Tokenizer original = Tokenizers.load(src).orElseThrow();
        Tokenizer copy = Tokenizers.load(shipped).orElseThrow();
        List<ChatTemplate.Message> chat = List.of(new ChatTemplate.Message("user", "Hello there"));
        String rendered = copy.chatTemplate().orElseThrow().render(chat, true);
        assertTrue(rendered.startsWith("[user] Hello there\n[assistant]"), rendered);
        assertEquals(original.chatTemplate().orElseThrow().render(chat, true), rendered);
        assertTrue(Arrays.equals(original.encode(rendered, false), copy.encode(rendered, false)));
    }

    /**
     * Verifying a folder this JVM has just checksummed reads nothing again (the driver and executor of a local master
     * are one JVM); a file rewritten since is read, and its new bytes fail the check, named.
     */
    @Test
    void verifyReusesThisJvmsChecksumsUntilAFileChanges() throws IOException {
        Path dir = withJinja("memo", JINJA);
        ModelManifest m = ModelManifest.of(dir);
        long before = ModelManifest.bytesChecksummed();
        m.verify(dir);
        assertEquals(before, ModelManifest.bytesChecksummed(), "an unchanged folder is not read again");
        Path shard = dir.resolve(m.files().get(m.files().size() - 1).name());
        byte[] bytes = Files.readAllBytes(shard);
        bytes[bytes.length - 1] ^= 1;
        Files.write(shard, bytes);
        Files.setLastModifiedTime(
                shard,
                java.nio.file.attribute.FileTime.fromMillis(
                        Files.getLastModifiedTime(shard).toMillis() + 2_000));
        CheckpointException e =
                org.junit.jupiter.api.Assertions.assertThrows(CheckpointException.class, () -> m.verify(dir));
        assertTrue(e.getMessage().startsWith(shard + ": checksum "), e.getMessage());
        assertTrue(ModelManifest.bytesChecksummed() - before >= bytes.length, "the changed file was read");
    }
}
