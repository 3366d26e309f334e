package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A tiny tiktoken vocabulary built here, in Kimi K2's file layout. */
class TiktokenTokenizerTest {
    /** Ranks 0..255 are the single bytes; then these merged tokens, in rank order from 256. */
    static final List<String> MERGED =
            List.of("he", "ll", "hell", "hello", " w", "or", "ld", " wor", " world", "ab", "aba");

    static final String CONFIG = "{\n"
            + "  \"added_tokens_decoder\": {\n"
            + "    \"267\": {\"content\": \"[BOS]\", \"special\": true},\n"
            + "    \"268\": {\"content\": \"[EOS]\", \"special\": true},\n"
            + "    \"269\": {\"content\": \"<|im_end|>\", \"special\": true},\n"
            + "    \"270\": {\"content\": \"<|im_user|>\", \"special\": true},\n"
            + "    \"271\": {\"content\": \"<|im_user|>x\", \"special\": true}\n"
            + "  },\n"
            + "  \"bos_token\": \"[BOS]\",\n"
            + "  \"eos_token\": {\"__type\": \"AddedToken\", \"content\": \"[EOS]\"},\n"
            + "  \"chat_template\": \"{% for m in messages %}<|im_{{ m.role }}|>{{ m.content }}<|im_end|>{% endfor %}\"\n"
            + "}\n";

    static byte[] modelFile() {
        StringBuilder sb = new StringBuilder();
        Base64.Encoder b64 = Base64.getEncoder();
        for (int b = 0; b < 256; b++) {
            sb.append(b64.encodeToString(new byte[] {(byte) b}))
                    .append(' ')
                    .append(b)
                    .append('\n');
        }
        for (int i = 0; i < MERGED.size(); i++) {
            sb.append(b64.encodeToString(MERGED.get(i).getBytes(StandardCharsets.UTF_8)))
                    .append(' ')
                    .append(256 + i)
                    .append('\n');
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static TiktokenTokenizer tiny() {
        return TiktokenTokenizer.fromBytes(
                "tiny/tiktoken.model",
                modelFile(),
                CONFIG.getBytes(StandardCharsets.UTF_8),
                TiktokenTokenizer.KIMI_PATTERN);
    }

    static int id(String merged) {
        return 256 + MERGED.indexOf(merged);
    }

    @Test
    void mergesByRank() {
        TiktokenTokenizer t = tiny();
        assertArrayEquals(new int[] {id("hello"), id(" world")}, t.encode("hello world", false));
        // "aba" is built from "ab" + "a"; in "abab" both "ab" (rank 265) beat "ab"+"a" (rank 266).
        assertArrayEquals(new int[] {id("aba")}, t.encode("aba", false));
        assertArrayEquals(new int[] {id("ab"), id("ab")}, t.encode("abab", false));
        // Han characters are their own pieces; with no merges they stay single bytes.
        assertArrayEquals(new int[] {0xE4, 0xBD, 0xA0, 0xE5, 0xA5, 0xBD}, t.encode("你好", false));
        assertEquals("hello world", t.decode(t.encode("hello world", false), false));
    }

    @Test
    void specialTokensInsideText() {
        TiktokenTokenizer t = tiny();
        String text = "<|im_user|>hello<|im_end|>[BOS] world<|im_user|>x";
        int[] ids = t.encode(text, false);
        // The longest special token wins: "<|im_user|>x" is one token.
        assertArrayEquals(new int[] {270, id("hello"), 269, 267, id(" world"), 271}, ids);
        assertEquals(text, t.decode(ids, false));
        assertEquals("hello world", t.decode(ids, true));
        assertTrue(t.isSpecial(269));
    }

    @Test
    void specialIdsAndVocabulary() {
        TiktokenTokenizer t = tiny();
        int base = 256 + MERGED.size();
        assertEquals(base + TiktokenTokenizer.KIMI_RESERVED_SPECIAL, t.vocabSize());
        assertEquals(267, t.bosTokenId());
        assertEquals(List.of(268), t.eosTokenIds());
        assertEquals(269, t.tokenId("<|im_end|>").getAsInt());
        assertEquals(id(" world"), t.tokenId("Ġworld").getAsInt()); // byte-level form, as Kimi's get_vocab()
        assertEquals(
                base + 10, t.tokenId("<|reserved_token_" + (base + 10) + "|>").getAsInt());
        assertTrue(t.tokenId("nope").isEmpty());
        // Kimi adds no BOS: tokenizer_config.json has no add_bos_token.
        assertArrayEquals(t.encode("hello", false), t.encode("hello", true));
    }

    @Test
    void addBosTokenFromConfig() {
        String config = CONFIG.replace("\"bos_token\"", "\"add_bos_token\": true, \"bos_token\"");
        TiktokenTokenizer t = TiktokenTokenizer.fromBytes(
                "tiny", modelFile(), config.getBytes(StandardCharsets.UTF_8), TiktokenTokenizer.KIMI_PATTERN);
        assertArrayEquals(new int[] {267, id("hello")}, t.encode("hello", true));
    }

    @Test
    void chatTemplateFromConfig() {
        ChatTemplate template = tiny().chatTemplate().orElseThrow();
        String out = template.render(
                List.of(new ChatTemplate.Message("user", "hi"), new ChatTemplate.Message("assistant", "yo")), false);
        assertEquals("<|im_user|>hi<|im_end|><|im_assistant|>yo<|im_end|>", out);
    }

    @Test
    void incrementalDecodingOfSplitCharacters() {
        TiktokenTokenizer t = tiny();
        IncrementalDecoder dec = t.incrementalDecoder(false);
        int[] ids = t.encode("你好", false);
        List<String> pieces = new ArrayList<>();
        for (int id : ids) {
            pieces.add(dec.feed(id));
        }
        assertEquals(List.of("", "", "你", "", "", "好"), pieces);
        assertEquals("", dec.finish());
        // An unfinished character at the end becomes U+FFFD.
        dec.feed(0xE4);
        assertEquals("\uFFFD", dec.finish());
    }

    /** Pieces of Kimi's pattern, as Python's regex module (V1, which has Rust regex's && classes) splits. */
    @Test
    void kimiPatternSplitsLikeReference() {
        Map<String, List<String>> expected = Map.of(
                "I'm 12345 你好abc HELLO World's\n\n  x",
                List.of("I'm", " ", "123", "45", " ", "你好", "abc", " HELLO", " World's", "\n\n", " ", " x"),
                "CamelCaseWord don'T stop!!\r\n\tend  ",
                List.of("Camel", "Case", "Word", " don'T", " stop", "!!\r\n", "\tend", "  "),
                "日本語のテキスト、中文。한국어 émoji 🚀🔥 $100.5",
                List.of("日本語", "のテキスト", "、", "中文", "。한국어", " émoji", " 🚀🔥", " $", "100", ".", "5"),
                "x=y+z; // 3.14159\n\n\n",
                List.of("x", "=y", "+z", ";", " //", " ", "3", ".", "141", "59", "\n\n\n"),
                "ÀÉÎ naïve\u3000full\u00a0nbsp",
                List.of("ÀÉÎ", " naïve", "\u3000full", "\u00a0nbsp"));
        Pattern p = Regexes.compile(TiktokenTokenizer.KIMI_PATTERN);
        for (Map.Entry<String, List<String>> e : expected.entrySet()) {
            List<String> got = new ArrayList<>();
            Matcher m = p.matcher(e.getKey());
            while (m.find()) {
                got.add(m.group());
            }
            assertEquals(e.getValue(), got, Regexes.quote(e.getKey()));
        }
    }

    @Test
    void loadsFromFolder(@TempDir Path dir) throws IOException {
        Files.write(dir.resolve("tiktoken.model"), modelFile());
        Files.writeString(dir.resolve("tokenizer_config.json"), CONFIG);
        Tokenizer t = Tokenizers.load(dir).orElseThrow();
        assertTrue(t instanceof TiktokenTokenizer);
        assertArrayEquals(new int[] {270, id("hello")}, t.encode("<|im_user|>hello", false));
    }

    @Test
    void corruptModelFileNamesLine(@TempDir Path dir) throws IOException {
        Files.writeString(dir.resolve("tiktoken.model"), "aGk= 0\nnot-base64!! 1\n");
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizers.load(dir));
        assertTrue(e.getMessage().contains("tiktoken.model") && e.getMessage().contains("line 2"), e.getMessage());
    }
}
