package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Tokenizers.load: picking the file, and errors that name the file and field. */
class TokenizersLoadTest {
    /** A minimal byte-level tokenizer.json: the 256 byte tokens, one merge "h e" -> "he". */
    static String tinyJson(String extra) {
        StringBuilder vocab = new StringBuilder();
        for (int b = 0; b < 256; b++) {
            char c = ByteLevel.BYTE_TO_CHAR[b];
            String key = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : String.valueOf(c);
            vocab.append('"').append(key).append("\": ").append(b).append(", ");
        }
        vocab.append("\"he\": 256");
        return "{\"version\": \"1.0\", " + extra
                + "\"added_tokens\": [{\"id\": 257, \"content\": \"<s>\", \"special\": true, \"lstrip\": false,"
                + " \"rstrip\": false, \"single_word\": false, \"normalized\": false}],"
                + " \"normalizer\": null,"
                + " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
                + " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
                + " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [257], \"tokens\": [\"<s>\"]}}},"
                + " \"decoder\": {\"type\": \"ByteLevel\"},"
                + " \"model\": {\"type\": \"BPE\", \"vocab\": {" + vocab + "}, \"merges\": [[\"h\", \"e\"]]}}";
    }

    @Test
    void emptyFolderHasNoTokenizer(@TempDir Path dir) {
        assertTrue(Tokenizers.load(dir).isEmpty());
    }

    @Test
    void loadsDeepSeekFolder(@TempDir Path dir) throws IOException {
        Files.write(dir.resolve("tokenizer.json.gz"), readResourceRaw("tokenizer.json.gz")); // still gzipped
        Files.write(dir.resolve("tokenizer_config.json"), DeepSeekV3TokenizerTest.resource("tokenizer_config.json"));
        Tokenizer t = Tokenizers.load(dir).orElseThrow();
        assertTrue(t instanceof HfTokenizer);
        assertArrayEquals(
                DeepSeekV3TokenizerTest.deepSeek().encode("Hello world!", true), t.encode("Hello world!", true));
        assertTrue(t.chatTemplate().isPresent());
    }

    private static byte[] readResourceRaw(String name) throws IOException {
        try (var in = TokenizersLoadTest.class.getResourceAsStream(DeepSeekV3TokenizerTest.DIR + name)) {
            return in.readAllBytes();
        }
    }

    @Test
    void tinyTokenizerJsonWithTemplatePostProcessor(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson(""));
        Tokenizer t = Tokenizers.load(dir).orElseThrow();
        assertArrayEquals(new int[] {256, 'y'}, t.encode("hey", false));
        assertArrayEquals(new int[] {257, 256, 'y'}, t.encode("hey", true)); // TemplateProcessing adds <s>
        assertArrayEquals(new int[] {257, 'a', 'G' + 0}, t.encode("<s>aG", false));
        assertEquals("<s>hey", t.decode(new int[] {257, 256, 'y'}, false));
        assertEquals("hey", t.decode(new int[] {257, 256, 'y'}, true));
    }

    @Test
    void addBosTokenFalseOverridesTemplate(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson(""));
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"add_bos_token\": false, \"bos_token\": \"<s>\"}");
        Tokenizer t = Tokenizers.load(dir).orElseThrow();
        assertArrayEquals(new int[] {256, 'y'}, t.encode("hey", true));
        assertEquals(257, t.bosTokenId());
    }

    @Test
    void chatTemplateFromJinjaFile(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson(""));
        Files.writeString(
                dir.resolve("chat_template.jinja"), "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}");
        Tokenizer t = Tokenizers.load(dir).orElseThrow();
        assertEquals(
                "[user]hi",
                t.chatTemplate()
                        .orElseThrow()
                        .render(java.util.List.of(new ChatTemplate.Message("user", "hi")), false));
    }

    /** A tokenizer_config.json linked to a file outside the folder is refused, naming it, unread and unquoted. */
    @Test
    void linkOutOfTheFolderIsRefusedUnquoted(@TempDir Path tmp) throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("model"));
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson(""));
        Path secret = Files.writeString(tmp.resolve("passwd"), "rootsecret:x:0:0:root:/root:/bin/bash\n");
        Files.createSymbolicLink(dir.resolve("tokenizer_config.json"), secret);
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains(dir.resolve("tokenizer_config.json").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("outside the model folder"), e.getMessage());
        assertTrue(!e.getMessage().contains("rootsecret"), e.getMessage());

        // A link inside the folder, and a Hugging Face cache snapshot's link into its blobs/, still load.
        Path hub = Files.createDirectories(tmp.resolve("models--o--m/snapshots/abc"));
        Path blob = Files.writeString(
                Files.createDirectories(tmp.resolve("models--o--m/blobs")).resolve("f00d"), tinyJson(""));
        Files.createSymbolicLink(hub.resolve("tokenizer.json"), Path.of("../../blobs/f00d"));
        assertTrue(Tokenizers.load(hub).isPresent());
        assertTrue(Files.isRegularFile(blob));
    }

    /** A tokenizer_config.json that is not JSON: its place, never its content. */
    @Test
    void parseErrorsNeverQuoteTheFile(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson(""));
        Files.writeString(dir.resolve("tokenizer_config.json"), "rootsecret:x:0:0:root:/root:/bin/bash\n");
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains("tokenizer_config.json"), e.getMessage());
        assertTrue(e.getMessage().contains("not valid JSON (line 1"), e.getMessage());
        assertTrue(!e.getMessage().contains("rootsecret"), e.getMessage());
        Throwable c = e;
        while ((c = c.getCause()) != null) {
            assertTrue(!String.valueOf(c.getMessage()).contains("rootsecret"), c.toString());
        }
    }

    @Test
    void corruptTokenizerJsonNamesFile(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tokenizer.json"), tinyJson("").substring(0, 500));
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains(dir.resolve("tokenizer.json").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
    }

    @Test
    void missingFileNamesFile(@TempDir Path dir) {
        Path missing = dir.resolve("tokenizer.json");
        TokenizerException e = assertThrows(TokenizerException.class, () -> HfTokenizer.readFile(missing));
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
    }

    @Test
    void badFieldsAreNamed(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("tokenizer.json");
        Files.writeString(file, tinyJson("").replace("\"merges\": [[\"h\", \"e\"]]", "\"merges\": [[\"h\", \"zz\"]]"));
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(
                e.getMessage().contains(file.toString()) && e.getMessage().contains("model.merges[0]"), e.getMessage());

        Files.writeString(file, tinyJson("").replace("\"type\": \"BPE\"", "\"type\": \"Unigram\""));
        e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains("model.type"), e.getMessage());

        Files.writeString(
                file,
                tinyJson("")
                        .replace(
                                "\"type\": \"ByteLevel\", \"add_prefix_space\"",
                                "\"type\": \"Metaspace\", \"add_prefix_space\""));
        e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains("pre_tokenizer.type"), e.getMessage());

        Files.writeString(file, tinyJson(""));
        Path config = dir.resolve("tokenizer_config.json");
        Files.writeString(config, "{\"add_bos_token\": true, \"bos_token\": 7}");
        e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains(config.toString()) && e.getMessage().contains("bos_token"), e.getMessage());

        Files.writeString(config, "{\"add_bos_token\": true, \"bos_token\": \"<nope>\"}");
        e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains(config.toString()) && e.getMessage().contains("bos_token"), e.getMessage());
    }

    @Test
    void fromBytesInMemory() {
        byte[] json = tinyJson("").getBytes(StandardCharsets.UTF_8);
        HfTokenizer t = HfTokenizer.fromJson("tiny", json, null);
        assertEquals(258, t.vocabSize());
        assertEquals("Ġ", t.token(' '));
    }
}
