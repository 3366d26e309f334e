package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** The real DeepSeek-V3 tokenizer against ids and chat renderings from reference implementations. */
class DeepSeekV3TokenizerTest {
    static final String DIR = "/tokenizers/deepseek-v3/";
    static HfTokenizer tokenizer;
    static JsonNode expected;

    static byte[] resource(String name) {
        try (InputStream in = DeepSeekV3TokenizerTest.class.getResourceAsStream(DIR + name)) {
            if (in == null) {
                throw new IllegalStateException("missing test resource " + DIR + name);
            }
            return (name.endsWith(".gz") ? new GZIPInputStream(in) : in).readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static synchronized HfTokenizer deepSeek() {
        if (tokenizer == null) {
            tokenizer = HfTokenizer.fromJson(
                    "deepseek-v3/tokenizer.json", resource("tokenizer.json.gz"), resource("tokenizer_config.json"));
        }
        return tokenizer;
    }

    @BeforeAll
    static void load() throws IOException {
        deepSeek();
        expected = new ObjectMapper().readTree(resource("expected.json"));
    }

    static Stream<Arguments> cases() throws IOException {
        JsonNode root = new ObjectMapper().readTree(resource("expected.json"));
        List<Arguments> out = new ArrayList<>();
        for (JsonNode c : root.get("cases")) {
            int[] ids = new int[c.get("ids").size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = c.get("ids").get(i).asInt();
            }
            out.add(Arguments.of(c.get("text").asText(), ids));
        }
        return out.stream();
    }

    @ParameterizedTest
    @MethodSource("cases")
    void encodesLikeReference(String text, int[] ids) {
        assertFalse(expected.get("add_special_tokens").asBoolean());
        assertArrayEquals(ids, tokenizer.encode(text, false), () -> "text " + Regexes.quote(text));
    }

    @ParameterizedTest
    @MethodSource("cases")
    void decodeInvertsEncode(String text, int[] ids) {
        assertEquals(text, tokenizer.decode(ids, false));
        int[] withBos = tokenizer.encode(text, true);
        assertEquals("<｜begin▁of▁sentence｜>" + text, tokenizer.decode(withBos, false));
    }

    @Test
    void fortyCases() {
        assertEquals(40, expected.get("cases").size());
    }

    @Test
    void prependsBosWithSpecialTokens() {
        assertEquals(0, tokenizer.bosTokenId());
        assertEquals(List.of(1), tokenizer.eosTokenIds());
        int[] plain = tokenizer.encode("Hello world!", false);
        int[] withBos = tokenizer.encode("Hello world!", true);
        assertEquals(plain.length + 1, withBos.length);
        assertEquals(0, withBos[0]);
        assertArrayEquals(plain, java.util.Arrays.copyOfRange(withBos, 1, withBos.length));
        assertArrayEquals(new int[] {0}, tokenizer.encode("", true));
        assertArrayEquals(new int[0], tokenizer.encode("", false));
    }

    @Test
    void specialTokensInTextAndSkippedOnDecode() {
        String text = "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜>";
        int[] ids = tokenizer.encode(text, false);
        int user = tokenizer.tokenId("<｜User｜>").getAsInt();
        int assistant = tokenizer.tokenId("<｜Assistant｜>").getAsInt();
        assertEquals(0, ids[0]);
        assertEquals(user, ids[1]);
        assertEquals(1, ids[ids.length - 1]);
        assertEquals(text, tokenizer.decode(ids, false));
        // <｜User｜> and <｜Assistant｜> are added tokens but not special ones: only BOS/EOS are skipped.
        assertTrue(tokenizer.isSpecial(0));
        assertFalse(tokenizer.isSpecial(user) || tokenizer.isSpecial(assistant));
        assertEquals("<｜User｜>Hi<｜Assistant｜>Hello!", tokenizer.decode(ids, true));
        assertEquals(128815, tokenizer.vocabSize());
    }

    @Test
    void chatsRenderExactly() {
        ChatTemplate template = tokenizer.chatTemplate().orElseThrow();
        for (JsonNode chat : expected.get("chats")) {
            List<Map<String, Object>> messages = new ArrayList<>();
            for (JsonNode m : chat.get("messages")) {
                Map<String, Object> map = new LinkedHashMap<>();
                map.put("role", m.get("role").asText());
                map.put("content", m.get("content").asText());
                messages.add(map);
            }
            String rendered = template.renderMaps(
                    messages, chat.get("add_generation_prompt").asBoolean(), Map.of());
            assertEquals(chat.get("rendered").asText(), rendered);
        }
        String simple = template.render(List.of(new ChatTemplate.Message("user", "What is 2+2?")), true);
        assertEquals(expected.get("chats").get(0).get("rendered").asText(), simple);
    }

    @Test
    void incrementalDecodingEmitsWholeCharacters() {
        String text = "你好，世界！🚀🔥👍🏽 naïve 🇫🇷 こんにちは";
        int[] ids = tokenizer.encode(text, true);
        IncrementalDecoder dec = tokenizer.incrementalDecoder(true);
        StringBuilder sb = new StringBuilder();
        boolean sawPartial = false;
        for (int id : ids) {
            String piece = dec.feed(id);
            // Every emitted piece is well-formed: no replacement chars, no lone surrogates.
            assertFalse(piece.contains("\uFFFD"), piece);
            assertTrue(StandardCharsets.UTF_8.newEncoder().canEncode(piece), piece);
            sawPartial |= dec.pendingBytes() > 0;
            sb.append(piece);
            assertTrue(text.startsWith(sb.toString()));
        }
        sb.append(dec.finish());
        assertEquals(text, sb.toString());
        assertTrue(sawPartial, "expected at least one character split across tokens");
    }
}
