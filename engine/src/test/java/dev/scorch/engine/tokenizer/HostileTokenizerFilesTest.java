package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * tokenizer.json, tokenizer_config.json and tiktoken.model are checkpoint data: hostile values end as a
 * TokenizerException naming the file and field (at load) or the text (at encode), in bounded time, never as
 * an OutOfMemoryError, a StackOverflowError or an index error (issue 24, item 9).
 */
class HostileTokenizerFilesTest {
    static final Duration BOUND = Duration.ofSeconds(60);
    static final ObjectMapper JSON = new ObjectMapper();

    /** TokenizersLoadTest's tiny byte-level tokenizer.json (ids 0-256, added <s> 257), edited. */
    static byte[] tiny(Consumer<ObjectNode> edit) throws IOException {
        ObjectNode root = (ObjectNode) JSON.readTree(TokenizersLoadTest.tinyJson(""));
        edit.accept(root);
        return JSON.writeValueAsBytes(root);
    }

    static String loadFailure(byte[] tokenizerJson, String config) {
        return assertTimeoutPreemptively(
                BOUND,
                () -> assertThrows(
                                TokenizerException.class,
                                () -> HfTokenizer.fromJson(
                                        "hostile/tokenizer.json",
                                        tokenizerJson,
                                        config == null ? null : config.getBytes(StandardCharsets.UTF_8)))
                        .getMessage());
    }

    static String encodeFailure(Tokenizer t, String text) {
        return assertTimeoutPreemptively(
                        BOUND, () -> assertThrows(TokenizerException.class, () -> t.encode(text, false)))
                .getMessage();
    }

    /** A Split pre-tokenizer with {@code regex} ahead of the file's ByteLevel one. */
    static void splitFirst(ObjectNode root, String regex) {
        ObjectNode split = JSON.createObjectNode()
                .put("type", "Split")
                .put("behavior", "Isolated")
                .put("invert", false);
        split.putObject("pattern").put("Regex", regex);
        ObjectNode seq = JSON.createObjectNode().put("type", "Sequence");
        seq.putArray("pretokenizers").add(split).add(root.get("pre_tokenizer"));
        root.set("pre_tokenizer", seq);
    }

    @Test
    void aVocabularyIdOfTwoBillionIsRefused() throws IOException {
        // Was new String[2_000_000_001]: OutOfMemoryError.
        String m = loadFailure(tiny(r -> ((ObjectNode) r.get("model").get("vocab")).put("zz", 2_000_000_000)), null);
        assertEquals(
                "hostile/tokenizer.json: field model.vocab[\"zz\"] is 2000000000, but the file has only 259 tokens"
                        + " (ids must be below 65795)",
                m);
        m = loadFailure(tiny(r -> ((ObjectNode) r.get("added_tokens").get(0)).put("id", 1_000_000)), null);
        assertEquals(
                "hostile/tokenizer.json: field added_tokens[0].id is 1000000, but the file has only 258 tokens"
                        + " (ids must be below 65794)",
                m);
        m = loadFailure(
                tiny(r -> {}),
                "{\"added_tokens_decoder\": {\"2000000000\": {\"content\": \"<x>\", \"special\": true}}}");
        assertEquals(
                "hostile/tokenizer.json: field added_tokens_decoder[\"2000000000\"] of hostile/tokenizer.json"
                        + " (tokenizer_config.json) is 2000000000, but the file has only 259 tokens (ids must be below 65795)",
                m);
        // Gaps as real files have them still load: an added token well past the vocabulary.
        Tokenizer t = HfTokenizer.fromJson(
                "gappy", tiny(r -> ((ObjectNode) r.get("added_tokens").get(0)).put("id", 60_000)), null);
        assertEquals(60_001, t.vocabSize());
        assertArrayEquals(new int[] {60_000, 256, 'y'}, t.encode("<s>hey", false));
    }

    @Test
    void negativeAndFractionalIdsAreRefused() throws IOException {
        // Was ArrayIndexOutOfBoundsException: Index -1 out of bounds for length 257.
        assertEquals(
                "hostile/tokenizer.json: field added_tokens[0].id is -1, not a token id (an integer from 0)",
                loadFailure(tiny(r -> ((ObjectNode) r.get("added_tokens").get(0)).put("id", -1)), null));
        assertEquals(
                "hostile/tokenizer.json: field model.vocab[\"he\"] is 2.5, not a token id (an integer from 0)",
                loadFailure(tiny(r -> ((ObjectNode) r.get("model").get("vocab")).put("he", 2.5)), null));
        assertEquals(
                "hostile/tokenizer.json (tokenizer_config.json): field added_tokens_decoder[\"-1\"]: key is not a token id"
                        + " (an integer from 0)",
                loadFailure(
                        tiny(r -> {}),
                        "{\"added_tokens_decoder\": {\"-1\": {\"content\": \"<x>\", \"special\": true}}}"));
        assertEquals(
                "hostile/tokenizer.json: field post_processor.special_tokens[\"<s>\"].ids[0] is 999999, outside the"
                        + " vocabulary of 258 ids",
                loadFailure(
                        tiny(r -> ((com.fasterxml.jackson.databind.node.ArrayNode) r.get("post_processor")
                                        .get("special_tokens")
                                        .get("<s>")
                                        .get("ids"))
                                .set(0, 999_999)),
                        null));
    }

    @Test
    void aSplitRegexThatOverflowsTheStackFailsThatTextOnly() throws IOException {
        // (a|aa)+$ recurses once per repetition in java.util.regex: StackOverflowError on the task thread.
        Tokenizer t = HfTokenizer.fromJson("hostile/tokenizer.json", tiny(r -> splitFirst(r, "(a|aa)+$")), null);
        assertEquals(
                "hostile/tokenizer.json: field pre_tokenizer.pretokenizers[0].pattern: regex '(a|aa)+$' overflowed"
                        + " the stack on a text of 50000 characters",
                encodeFailure(t, "a".repeat(50_000)));
        assertArrayEquals(new int[] {256, 'y', 'a', 'a'}, t.encode("heyaa", false)); // other texts, the same thread
    }

    @Test
    void aSplitRegexThatBacktracksForEverFailsThatTextOnly() throws IOException {
        // ((a+)*)+b on 30 a's backtracks ~2^30 times: minutes, then more for each further character.
        Tokenizer t = HfTokenizer.fromJson("hostile/tokenizer.json", tiny(r -> splitFirst(r, "((a+)*)+b")), null);
        assertEquals(
                "hostile/tokenizer.json: field pre_tokenizer.pretokenizers[0].pattern: regex '((a+)*)+b' backtracked"
                        + " past 1000 steps a character on a text of 40 characters",
                encodeFailure(t, "a".repeat(40)));
        assertArrayEquals(new int[] {256, 'y', 'a', 'a', 'b'}, t.encode("heyaab", false));
    }

    @Test
    void aReplaceNormalizerCannotBlowATextUp() throws IOException {
        // 'a' -> 1 MB: a 5,000-character text would become 5 GB (OutOfMemoryError).
        String mb = "b".repeat(1 << 20);
        for (String kind : new String[] {"String", "Regex"}) {
            Tokenizer t = HfTokenizer.fromJson(
                    "hostile/tokenizer.json",
                    tiny(r -> {
                        ObjectNode n =
                                JSON.createObjectNode().put("type", "Replace").put("content", mb);
                        n.putObject("pattern").put(kind, "a");
                        r.set("normalizer", n);
                    }),
                    null);
            assertEquals(
                    "hostile/tokenizer.json: field normalizer would make a text of 5000 characters longer than the"
                            + " 164096 it may grow to",
                    encodeFailure(t, "a".repeat(5000)),
                    kind);
            assertArrayEquals(new int[] {256, 'y'}, t.encode("hey", false), kind);
        }
        // A normalizer that grows text within bounds (NFKC: U+FDFA is 18 characters) is fine.
        Tokenizer nfkc = HfTokenizer.fromJson(
                "nfkc", tiny(r -> r.set("normalizer", JSON.createObjectNode().put("type", "NFKC"))), null);
        assertEquals(
                18 * 100,
                nfkc.decode(nfkc.encode("\uFDFA".repeat(100), false), false).length());
    }

    @Test
    void tiktokenRanksAndSpecialIdsAreBoundedByTheFile() {
        byte[] model = TiktokenTokenizerTest.modelFile();
        byte[] huge =
                (new String(model, StandardCharsets.UTF_8) + "enp6 2000000000\n").getBytes(StandardCharsets.UTF_8);
        String m = assertTimeoutPreemptively(
                BOUND,
                () -> assertThrows(
                                TokenizerException.class,
                                () -> TiktokenTokenizer.fromBytes(
                                        "hostile/tiktoken.model", huge, null, TiktokenTokenizer.KIMI_PATTERN))
                        .getMessage());
        assertEquals(
                "hostile/tiktoken.model: line 268 has rank 2000000000, but the file has only 268 tokens"
                        + " (ranks must be below 65804)",
                m);
        byte[] config = "{\"added_tokens_decoder\": {\"2000000000\": {\"content\": \"<x>\", \"special\": true}}}"
                .getBytes(StandardCharsets.UTF_8);
        m = assertThrows(
                        TokenizerException.class,
                        () -> TiktokenTokenizer.fromBytes(
                                "hostile/tiktoken.model", model, config, TiktokenTokenizer.KIMI_PATTERN))
                .getMessage();
        assertEquals(
                "hostile/tiktoken.model (tokenizer_config.json): field added_tokens_decoder[\"2000000000\"] is a token id"
                        + " past the 526 tokens of the tokenizer (ids must be below 66062)",
                m);
        byte[] negative = "{\"added_tokens_decoder\": {\"-1\": {\"content\": \"<x>\", \"special\": true}}}"
                .getBytes(StandardCharsets.UTF_8);
        m = assertThrows(
                        TokenizerException.class,
                        () -> TiktokenTokenizer.fromBytes(
                                "hostile/tiktoken.model", model, negative, TiktokenTokenizer.KIMI_PATTERN))
                .getMessage();
        assertTrue(m.endsWith("field added_tokens_decoder[\"-1\"]: key is not a token id (an integer from 0)"), m);
    }

    @Test
    void aTiktokenSplitPatternThatRunsAwayFailsThatTextOnly() {
        TiktokenTokenizer t = TiktokenTokenizer.fromBytes(
                "hostile/tiktoken.model", TiktokenTokenizerTest.modelFile(), null, "((a+)*)+b|.");
        assertEquals(
                "hostile/tiktoken.model: the split pattern: regex '((a+)*)+b|.' backtracked past 1000 steps a"
                        + " character on a text of 40 characters",
                encodeFailure(t, "a".repeat(40)));
        assertEquals(5, t.encode("hello", false).length); // "." splits every character
    }
}
