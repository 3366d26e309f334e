package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Incremental decoding, the two BPE loops, added-token matching and chat template errors. */
class TokenizerPartsTest {

    /** A tokenizer whose token i is the given byte string; only decoding works. */
    static Tokenizer bytesTokenizer(List<byte[]> tokens) {
        return new Tokenizer() {
            @Override
            public int[] encode(String text, boolean addSpecialTokens) {
                throw new UnsupportedOperationException();
            }

            @Override
            public String decode(int[] ids, boolean skipSpecialTokens) {
                java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
                for (int id : ids) {
                    out.writeBytes(tokens.get(id));
                }
                return Utf8.decode(out.toByteArray(), 0, out.size());
            }

            @Override
            public int vocabSize() {
                return tokens.size();
            }

            @Override
            public Integer bosTokenId() {
                return null;
            }

            @Override
            public List<Integer> eosTokenIds() {
                return List.of();
            }

            @Override
            public OptionalInt tokenId(String token) {
                return OptionalInt.empty();
            }

            @Override
            public byte[] tokenBytes(int id) {
                return tokens.get(id);
            }

            @Override
            public boolean isSpecial(int id) {
                return false;
            }
        };
    }

    @Test
    void incrementalDecoderMatchesWholeDecodeOnRandomBytes() {
        Random rnd = new Random(42);
        // Tokens: random 1..3 byte strings biased towards UTF-8 lead/continuation bytes.
        List<byte[]> tokens = new ArrayList<>();
        int[] interesting = {0x41, 0x80, 0xBF, 0xC2, 0xC0, 0xE0, 0xE2, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0xA0, 0x9F, 0x90};
        for (int i = 0; i < 64; i++) {
            byte[] b = new byte[1 + rnd.nextInt(3)];
            for (int j = 0; j < b.length; j++) {
                b[j] = (byte) (rnd.nextBoolean() ? interesting[rnd.nextInt(interesting.length)] : rnd.nextInt(256));
            }
            tokens.add(b);
        }
        // Plus real text split into single bytes.
        for (byte b : "€😀é".getBytes(StandardCharsets.UTF_8)) {
            tokens.add(new byte[] {b});
        }
        Tokenizer t = bytesTokenizer(tokens);
        for (int round = 0; round < 2000; round++) {
            int[] ids = new int[1 + rnd.nextInt(12)];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = rnd.nextInt(tokens.size());
            }
            IncrementalDecoder dec = t.incrementalDecoder(false);
            StringBuilder sb = new StringBuilder();
            for (int id : ids) {
                sb.append(dec.feed(id));
                assertTrue(dec.pendingBytes() <= 3);
            }
            sb.append(dec.finish());
            assertEquals(t.decode(ids, false), sb.toString(), () -> java.util.Arrays.toString(ids));
        }
    }

    /** U+FFFD counts from Python's bytes.decode("utf-8", "replace") (maximal subparts, like Rust). */
    @Test
    void lossyUtf8LikePython() {
        Map<String, String> cases = Map.of(
                "eda080", "\uFFFD\uFFFD\uFFFD",
                "e080", "\uFFFD\uFFFD",
                "f09f41", "\uFFFDA",
                "c0af", "\uFFFD\uFFFD",
                "f4908080", "\uFFFD\uFFFD\uFFFD\uFFFD",
                "e282", "\uFFFD",
                "f09f98", "\uFFFD",
                "e282ac80", "€\uFFFD",
                "eda9a9f0e29fe028cced", "\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD(\uFFFD\uFFFD");
        for (Map.Entry<String, String> e : cases.entrySet()) {
            byte[] b = java.util.HexFormat.of().parseHex(e.getKey());
            assertEquals(e.getValue(), Utf8.decode(b, 0, b.length), e.getKey());
        }
        Random rnd = new Random(1);
        for (int i = 0; i < 200; i++) {
            StringBuilder sb = new StringBuilder();
            for (int j = 0; j < 20; j++) {
                sb.appendCodePoint(rnd.nextInt(4) == 0 ? 0x10000 + rnd.nextInt(0x1000) : rnd.nextInt(0xD000));
            }
            byte[] b = sb.toString().getBytes(StandardCharsets.UTF_8);
            assertEquals(sb.toString(), Utf8.decode(b, 0, b.length));
        }
    }

    @Test
    void incrementalDecoderPolicy() {
        List<byte[]> tokens = List.of(
                new byte[] {(byte) 0xF0, (byte) 0x9F},
                new byte[] {(byte) 0x9A},
                new byte[] {(byte) 0x80},
                new byte[] {(byte) 0xE0, (byte) 0x80},
                "a".getBytes(StandardCharsets.UTF_8));
        IncrementalDecoder dec = bytesTokenizer(tokens).incrementalDecoder(false);
        assertEquals("", dec.feed(0)); // F0 9F: first half of 🚀, held back
        assertEquals("", dec.feed(1)); // F0 9F 9A: still incomplete
        assertEquals("🚀", dec.feed(2)); // F0 9F 9A 80
        assertEquals("\uFFFD", dec.feed(2)); // a stray continuation byte can never become valid: out at once
        assertEquals("\uFFFD\uFFFD", dec.feed(3)); // E0 80 is overlong: invalid at once
        assertEquals("", dec.feed(0));
        assertEquals("\uFFFDa", dec.feed(4)); // F0 9F followed by 'a': one U+FFFD, then the 'a'
        assertEquals("", dec.feed(0));
        assertEquals("\uFFFD", dec.finish()); // unfinished at the end
        assertEquals(0, dec.pendingBytes());
    }

    @Test
    void heapAndRescanLoopsAgree() {
        HfTokenizer t = DeepSeekV3TokenizerTest.deepSeek();
        BytePairEncoder bpe = extractBpe(t);
        Random rnd = new Random(7);
        String alphabet = "aabcdeeilnorsttu  .,";
        for (int round = 0; round < 300; round++) {
            StringBuilder sb = new StringBuilder();
            int len = 2 + rnd.nextInt(120);
            for (int i = 0; i < len; i++) {
                sb.append(alphabet.charAt(rnd.nextInt(alphabet.length())));
            }
            byte[] bytes = sb.toString().getBytes(StandardCharsets.UTF_8);
            int[] syms = new int[bytes.length];
            for (int i = 0; i < bytes.length; i++) {
                syms[i] = t.tokenId(String.valueOf(ByteLevel.BYTE_TO_CHAR[bytes[i] & 0xFF]))
                        .getAsInt();
            }
            assertArrayEquals(bpe.merge(syms, false), bpe.merge(syms, true), sb.toString());
        }
        // A long word (over the rescan limit) still tokenizes and round-trips.
        String longWord = "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(5);
        assertEquals(longWord, t.decode(t.encode(longWord, false), false));
    }

    private static BytePairEncoder extractBpe(HfTokenizer t) {
        try {
            var f = HfTokenizer.class.getDeclaredField("bpe");
            f.setAccessible(true);
            return (BytePairEncoder) f.get(t);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void addedTokenFlags() {
        AddedToken strip = new AddedToken(1, "<mask>", true, true, true, false, false);
        AddedToken word = new AddedToken(2, "cat", false, false, false, true, false);
        AddedTokenMatcher m = new AddedTokenMatcher(List.of(strip, word));
        List<AddedTokenMatcher.Piece> out = new ArrayList<>();
        String text = "a  <mask>  b cat concat cat";
        m.split(text, 0, text.length(), out);
        List<String> pieces = new ArrayList<>();
        for (AddedTokenMatcher.Piece p : out) {
            pieces.add((p.token() == null ? "" : "#") + text.substring(p.start(), p.end()));
        }
        // lstrip/rstrip swallow the spaces around <mask>; "cat" only matches as a whole word.
        assertEquals(List.of("a", "#  <mask>  ", "b ", "#cat", " concat ", "#cat"), pieces);
    }

    @Test
    void regexTranslation() {
        assertEquals("[\\p{IsHan}]+\\p{L}\\P{IsLatin}\\x0B", Regexes.toJava("[\\p{Han}]+\\p{L}\\P{Latin}\\v"));
        // Unicode \s: U+3000 and NBSP are whitespace, as in Oniguruma and Rust's regex.
        assertTrue(Regexes.compile("^\\s+$").matcher("\u3000\u00a0").matches());
    }

    @Test
    void chatTemplateRaiseException() {
        ChatTemplate t = new ChatTemplate(
                "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}"
                        + "{{ m.content }}{% endfor %}",
                "<s>", "</s>");
        assertEquals("hi", t.render(List.of(new ChatTemplate.Message("user", "hi")), false));
        ChatTemplate.ChatTemplateException e = assertThrows(
                ChatTemplate.ChatTemplateException.class,
                () -> t.render(List.of(new ChatTemplate.Message("tool", "x")), false));
        assertTrue(e.getMessage().contains("no tools here"), e.getMessage());
    }

    @Test
    void chatTemplateTrimsBlocksAndSeesTokens() {
        ChatTemplate t = new ChatTemplate(
                "{{ bos_token }}\n{% for m in messages %}\n  {% if m.role == 'user' %}\nU: {{ m.content }}\n  {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}A:{% endif %}",
                "<s>", null);
        String out = t.renderMaps(List.of(Map.of("role", "user", "content", "hi")), true, Map.of());
        assertEquals("<s>\nU: hi\nA:", out);
    }

    /** Constructs Kimi K2's and other templates use, written as Jinja2 would take them. */
    @Test
    void chatTemplatePythonisms() {
        ChatTemplate t = new ChatTemplate(
                "{%- set ns = namespace(n=0) -%}"
                        + "{%- for m in messages -%}"
                        + "{%- set ns.n = ns.n + 1 -%}"
                        + "<|im_{{ m.role }}|>{{ m.get('name') or m['role'] }}<|im_middle|>{{ m['content'] }}"
                        + "{%- if not loop.last %}<|im_end|>{% endif -%}"
                        + "{%- endfor -%}"
                        + "{{ ns.n }}{% if tools is defined %}{{ tools | tojson }}{% endif %}",
                null, null);
        String out = t.renderMaps(
                List.of(
                        Map.of("role", "system", "content", "s"),
                        Map.of("role", "tool", "name", "calc", "content", "4")),
                false,
                Map.of("tools", List.of(Map.of("name", "calc"))));
        assertEquals(
                "<|im_system|>system<|im_middle|>s<|im_end|><|im_tool|>calc<|im_middle|>42[{\"name\": \"calc\"}]", out);
        // tojson writes like Python's json.dumps (transformers' filter), not compact JSON.
        ChatTemplate json = new ChatTemplate("{{ x | tojson }}|{{ x | tojson(indent=2) }}", null, null);
        Map<String, Object> x = new java.util.LinkedHashMap<>();
        x.put("a", List.of(1, 2.5, true));
        x.put("é", "q\"\n");
        assertEquals(
                "{\"a\": [1, 2.5, true], \"é\": \"q\\\"\\n\"}|{\n  \"a\": [\n    1,\n    2.5,\n    true\n  ],\n  \"é\": \"q\\\"\\n\"\n}",
                json.renderMaps(List.of(), false, Map.of("x", x)));
    }
}
