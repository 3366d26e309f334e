package dev.scorch.engine.tokenizer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.tokenizer.ChatTemplate.ChatTemplateException;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * A chat template is checkpoint data, so a hostile one must end as an exception for the render, in bounded
 * time, without taking the calling thread down, and must not read anything (issue 24, items 6 to 8). Each
 * hostile case once killed the JVM (StackOverflowError, OutOfMemoryError), ran for minutes, or read a file.
 */
class ChatTemplateSandboxTest {
    /** Generous: each case ends in seconds; before the sandbox some ran for minutes or killed the JVM. */
    static final Duration BOUND = Duration.ofSeconds(60);
    /** One CPU second, no allocation limit: the loops below stop on time, deterministically. */
    static final ChatTemplate.Limits ONE_SECOND =
            new ChatTemplate.Limits(TimeUnit.SECONDS.toNanos(1), Long.MAX_VALUE, 64L << 20, 1_000_000, 100);

    /**
     * The default limits but 20 CPU seconds: the overflow cases below must end on the stack, which a slow or loaded
     * machine can take past the default 5 s to reach.
     */
    static final ChatTemplate.Limits STACK_ONLY = new ChatTemplate.Limits(
            TimeUnit.SECONDS.toNanos(20),
            ChatTemplate.Limits.DEFAULT.maxAllocatedBytes(),
            ChatTemplate.Limits.DEFAULT.maxStringChars(),
            ChatTemplate.Limits.DEFAULT.maxItems(),
            ChatTemplate.Limits.DEFAULT.maxBracketDepth());

    static ChatTemplate deep(String template) {
        return new ChatTemplate(template, null, null, STACK_ONLY);
    }

    static final List<ChatTemplate.Message> HI = List.of(new ChatTemplate.Message("user", "hi"));

    /** The message of the ChatTemplateException rendering {@code template} throws, within {@link #BOUND}. */
    static String failure(String template) {
        return failure(new ChatTemplate(template, "<s>", "</s>"));
    }

    static String failure(ChatTemplate t) {
        return assertTimeoutPreemptively(
                BOUND,
                () -> assertThrows(ChatTemplateException.class, () -> t.render(HI, true))
                        .getMessage());
    }

    static String nested(String open, String inner, String close, int n) {
        return open.repeat(n) + inner + close.repeat(n);
    }

    // ---------------------------------------------------------------------------------------------------------
    // 6. Errors that are not RuntimeExceptions

    @Test
    void deepNestingOverflowsTheWorkerStackNotTheCaller() {
        // 5,000 nested ifs overflowed an executor's stack (exit 50); the worker's stack holds them.
        assertEquals(
                "x", deep(nested("{% if true %}", "x", "{% endif %}", 5000)).render(HI, true));
        String m = failure(deep(nested("{% if true %}", "x", "{% endif %}", 20_000)));
        assertEquals("chat template overflowed the 4 MiB render stack: it nests or recurses too deeply", m);
        m = failure(deep(nested("{% for x in [1] %}", "x", "{% endfor %}", 20_000)));
        assertEquals("chat template overflowed the 4 MiB render stack: it nests or recurses too deeply", m);
        // A chain of macro calls overflows while rendering, inside a call Jinjava catches errors of.
        StringBuilder chain = new StringBuilder();
        for (int i = 0; i < 5000; i++) {
            chain.append("{% macro m")
                    .append(i)
                    .append("() %}")
                    .append(i < 4999 ? "{{ m" + (i + 1) + "() }}" : "end")
                    .append("{% endmacro %}");
        }
        assertEquals(
                "chat template overflowed the 4 MiB render stack: it nests or recurses too deeply",
                failure(deep(chain + "{{ m0() }}")));
        assertEquals("end", deep(chain + "{{ m4990() }}").render(HI, true));
    }

    @Test
    void aTemplateRendersAgainAfterAnOverflow() {
        ChatTemplate deep = deep(nested("{% if true %}", "x", "{% endif %}", 20_000));
        ChatTemplate plain = new ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", null, null);
        for (int i = 0; i < 3; i++) {
            assertTrue(failure(deep).contains("overflowed"));
            assertEquals("hi", plain.render(HI, true)); // the worker threads are reused and clean
        }
    }

    @Test
    void aListDoubledFortyTimesHitsTheListLimit() {
        // Was OutOfMemoryError (exit 52).
        String m = failure("{% set l = [1] %}{% for i in range(40) %}{% set l = l + l %}{% endfor %}{{ l|length }}");
        assertTrue(m.startsWith("chat template failed at line 1: "), m);
        assertTrue(m.contains("Collection of size 1048576 is greater than the maximum size of 1000000"), m);
        m = failure("{% set l = [1] %}{% for i in range(40) %}{% do l.extend(l) %}{% endfor %}{{ l|length }}");
        assertTrue(m.contains("Collection of size 1048576 is greater than the maximum size of 1000000"), m);
    }

    @Test
    void deepParenthesesAreRefusedBeforeParsing() {
        // 1,000 overflowed the stack; 20,000 parsed for over two minutes (Jinjava's parser is superlinear in depth).
        assertEquals("1", new ChatTemplate("{{ " + nested("(", "1", ")", 100) + " }}", null, null).render(HI, true));
        assertEquals(
                "chat template nests brackets 1000 deep, over the limit of 100",
                failure("{{ " + nested("(", "1", ")", 1000) + " }}"));
        assertEquals(
                "chat template nests brackets 20000 deep, over the limit of 100",
                failure("{% if " + nested("(", "1", ")", 20_000) + " %}x{% endif %}"));
        // Brackets in strings and comments do not count; in a {% set %} they do.
        assertEquals(0, ChatTemplate.bracketDepth("{{ '((((' }}{# (((( #}(((( text"));
        assertEquals(3, ChatTemplate.bracketDepth("{% set x = {'a': [(1)]} %}{{ \"(\" }}"));
    }

    @Test
    void callsWhoseSizeAnArgumentSetsAreRefused() {
        // Each of these allocated gigabytes in one step (OutOfMemoryError).
        assertEquals("chat template may not call the method repeat()", failure("{{ 'a'.repeat(2000000000) }}"));
        assertEquals(
                "chat template called center() for 1500000000 characters, over the limit of 67108864",
                failure("{{ 'a'|center(1500000000) }}"));
        assertEquals(
                "chat template called format() for 1500000000 characters, over the limit of 67108864",
                failure("{{ '%1500000000d'|format(1) }}"));
        assertEquals(
                "chat template called indent() for 3000000003 characters, over the limit of 67108864",
                failure("{{ 'a\\nb'|indent(1500000000) }}"));
        assertEquals(
                "chat template called batch(2000000000), over the limit of 1000000 items",
                failure("{{ [1, 2]|batch(2000000000, 0)|list }}"));
        // 10 -> 100 -> 10^4 -> 10^8 characters: the third replace is refused before it runs.
        assertEquals(
                "chat template called replace() for 100000000 characters, over the limit of 67108864",
                failure("{% set ns = namespace(s='aaaaaaaaaa') %}{% for i in range(3) %}"
                        + "{% set ns.s = ns.s.replace('a', ns.s) %}{% endfor %}{{ ns.s|length }}"));
        assertEquals(
                "chat template made a string of 134217728 characters, over the limit of 67108864",
                failure("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s.concat(ns.s) %}"
                        + "{% endfor %}{{ ns.s|length }}"));
        // The same calls within the limits work as before.
        assertEquals(
                "   a   |x    1y|  a\n  b|aaaa",
                new ChatTemplate(
                                "{{ 'a'|center(7) }}|{{ 'x%5dy'|format(1) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'aa'.replace('a', 'aa') }}",
                                null, null)
                        .render(HI, true));
    }

    @Test
    void regexMethodsAreRefusedAndSplitIsLiteralAsInPython() {
        // java.util.regex backtracks for ever on (a|aa)+b; templates may not hand it a pattern.
        String as = "a".repeat(5000);
        assertEquals(
                "chat template may not call the method matches()", failure("{{ '" + as + "'.matches('(a|aa)+b') }}"));
        assertEquals(
                "chat template may not call the method replaceAll()", failure("{{ 'x'.replaceAll('(a|aa)+$', '') }}"));
        ChatTemplate t = new ChatTemplate(
                "{{ '" + as
                        + "'.split('(a|aa)+$')|length }}|{{ 'a.b.c'.split('.')|join('/') }}|{{ 'a b c'.split(' ', 1)|join('/') }}"
                        + "|{{ 'reasoning</think>'.split('</think>')[-1] }}|{{ 'x</think>answer'.split('</think>')[-1] }}",
                null,
                null);
        // Python: '...'.split('</think>')[-1] is '' when the text ends with the separator.
        assertEquals("1|a/b/c|a/b c||answer", assertTimeoutPreemptively(BOUND, () -> t.render(HI, true)));
    }

    // ---------------------------------------------------------------------------------------------------------
    // 7. Time

    @Test
    void threeNestedRangesStopAtTheTimeLimit() {
        // 26 s a row before.
        ChatTemplate t = new ChatTemplate(
                "{% for a in range(1000) %}{% for b in range(1000) %}{% for c in range(1000) %}"
                        + "{% endfor %}{% endfor %}{% endfor %}done",
                null, null, ONE_SECOND);
        assertEquals("chat template exceeded the 1 s render time limit", failure(t));
    }

    @Test
    void nineNestedLoopsOverTenItemsStopAtTheTimeLimit() {
        // Over 120 s before.
        StringBuilder sb = new StringBuilder("{% set l = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] %}");
        for (int i = 0; i < 9; i++) {
            sb.append("{% for x").append(i).append(" in l %}");
        }
        sb.append("{{ x8 }}");
        for (int i = 0; i < 9; i++) {
            sb.append("{% endfor %}");
        }
        assertEquals(
                "chat template exceeded the 1 s render time limit",
                failure(new ChatTemplate(sb.toString(), null, null, ONE_SECOND)));
    }

    @Test
    void allocationIsBounded() {
        // Each string is under every size limit; together they would fill the heap.
        ChatTemplate.Limits small =
                new ChatTemplate.Limits(TimeUnit.SECONDS.toNanos(60), 64L << 20, 64L << 20, 1_000_000, 100);
        ChatTemplate t = new ChatTemplate(
                "{% set ns = namespace(s='x', keep=[]) %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                        + "{% for i in range(100000) %}{% do ns.keep.append(ns.s ~ i) %}{% endfor %}{{ ns.keep|length }}",
                null, null, small);
        assertEquals("chat template allocated more than the 64 MiB one render may allocate", failure(t));
    }

    @Test
    void aRenderThatStopsCheckingIsAbandonedAtTheWallLimit() throws Exception {
        // No known template does this (every step comes back to a check); the caller must still not hang.
        ChatTemplate.Limits limits =
                new ChatTemplate.Limits(TimeUnit.MILLISECONDS.toNanos(200), Long.MAX_VALUE, 1000, 1000, 10);
        AtomicBoolean release = new AtomicBoolean();
        int before = RenderGuard.abandoned();
        try {
            ChatTemplateException e = assertTimeoutPreemptively(
                    BOUND,
                    () -> assertThrows(
                            ChatTemplateException.class,
                            () -> RenderGuard.run(
                                    () -> {
                                        while (!release.get()) {
                                            Thread.onSpinWait();
                                        }
                                        return "late";
                                    },
                                    limits)));
            assertEquals("chat template exceeded the 200 ms render time limit", e.getMessage());
            assertEquals(before + 1, RenderGuard.abandoned());
        } finally {
            release.set(true);
        }
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (RenderGuard.abandoned() != before && System.nanoTime() < until) {
            Thread.sleep(10);
        }
        assertEquals(before, RenderGuard.abandoned(), "the render that finished late is no longer counted");
    }

    // ---------------------------------------------------------------------------------------------------------
    // 8. Reading

    @Test
    void templatesCannotReadClassPathResources() {
        // On the test class path as core-default.xml is on a cluster's: include used to paste it into the prompt.
        String resource = "tokenizers/deepseek-v3/tokenizer_config.json";
        assertTrue(getClass().getClassLoader().getResource(resource) != null);
        for (String tag : List.of(
                "{% include '" + resource + "' %}",
                "{% import '" + resource + "' as m %}x",
                "{% from '" + resource + "' import y %}x",
                "{% extends '" + resource + "' %}")) {
            assertEquals(
                    "chat template may not read other templates or files (it asked for '" + resource + "')",
                    failure(tag),
                    tag);
        }
        // Refused when it runs, as in transformers' Jinja2 (no loader): a branch not taken renders.
        assertEquals(
                "hi",
                new ChatTemplate(
                                "{% if false %}{% include 'core-default.xml' %}{% endif %}"
                                        + "{{ messages[0].content }}",
                                null, null)
                        .render(HI, true));
    }

    @Test
    void messageTextIsNeverRenderedAsATemplate() {
        // Jinjava re-rendered output holding {{ }} (nested interpretation): a row's text ran as template code.
        ChatTemplate t = new ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", null, null);
        assertEquals("{{ 7*7 }}", t.render(List.of(new ChatTemplate.Message("user", "{{ 7*7 }}")), false)); // was 49
        assertEquals(
                "{{ 7*7 }} {% include 'x' %}",
                t.render(List.of(new ChatTemplate.Message("user", "{{ 7*7 }} {% include 'x' %}")), false));
        assertEquals(
                "chat template may not use the render filter: a chat template can neither read other templates or"
                        + " files nor render text as a template",
                failure("{{ messages[0].content|render }}"));
    }

    // ---------------------------------------------------------------------------------------------------------
    // Real templates are far from every limit

    @Test
    void deepSeekRendersALongConversation() throws IOException {
        ChatTemplate t = deepSeek();
        List<Map<String, Object>> chat = new ArrayList<>();
        String text = "word ".repeat(20_000); // 100,000 characters a message, 2 MB in all
        for (int i = 0; i < 10; i++) {
            chat.add(Map.of("role", "user", "content", text));
            chat.add(Map.of("role", "assistant", "content", text));
        }
        String out = assertTimeoutPreemptively(BOUND, () -> t.renderMaps(chat, true, Map.of()));
        assertEquals(
                "<s>".length()
                        + 20 * text.length()
                        + 10 * "<｜User｜><｜Assistant｜><｜end▁of▁sentence｜>".length()
                        + "<｜Assistant｜>".length(),
                out.length());
    }

    /** Macros, tool calls, tojson, get(), loop and namespace, as Kimi K2's template uses them. */
    @Test
    void aKimiStyleTemplateRendersUnderTheSandbox() {
        ChatTemplate t = new ChatTemplate(
                "{%- macro text(m) -%}{%- if m.content is string -%}{{ m.content }}{%- elif m.content -%}"
                        + "{%- for part in m.content -%}{{ part['text'] }}{%- endfor -%}{%- endif -%}{%- endmacro -%}"
                        + "{%- if tools -%}<|im_system|>tool_declare<|im_middle|>{{ tools | tojson }}<|im_end|>{%- endif -%}"
                        + "{%- for m in messages -%}<|im_{{ m.role }}|>{{ m.get('name') or m.role }}<|im_middle|>{{ text(m) }}"
                        + "{%- if m.get('tool_calls') -%}<|tool_calls_section_begin|>{%- for c in m['tool_calls'] -%}"
                        + "<|tool_call_begin|>{{ c['id'] }}<|tool_call_argument_begin|>{{ c['function']['arguments'] | tojson }}"
                        + "<|tool_call_end|>{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}<|im_end|>{%- endfor -%}"
                        + "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}",
                null, null);
        Map<String, Object> call = Map.of("id", "functions.calc:0", "function", Map.of("arguments", Map.of("x", 2)));
        String out = t.renderMaps(
                List.of(
                        Map.of("role", "user", "content", List.of(Map.of("type", "text", "text", "2+2?"))),
                        Map.of("role", "assistant", "content", "", "tool_calls", List.of(call)),
                        Map.of("role", "tool", "name", "calc", "content", "4")),
                true,
                Map.of("tools", List.of(Map.of("name", "calc"))));
        assertEquals(
                "<|im_system|>tool_declare<|im_middle|>[{\"name\": \"calc\"}]<|im_end|>"
                        + "<|im_user|>user<|im_middle|>2+2?<|im_end|>"
                        + "<|im_assistant|>assistant<|im_middle|><|tool_calls_section_begin|><|tool_call_begin|>functions.calc:0"
                        + "<|tool_call_argument_begin|>{\"x\": 2}<|tool_call_end|><|tool_calls_section_end|><|im_end|>"
                        + "<|im_tool|>calc<|im_middle|>4<|im_end|><|im_assistant|>assistant<|im_middle|>",
                out);
    }

    @Test
    void aCallerWithASmallStackStillRenders() throws Exception {
        // Rendering runs on the guard's worker threads, whose stack is known, not on the caller's.
        ChatTemplate t = deepSeek();
        String[] out = new String[1];
        Thread small = new Thread(null, () -> out[0] = t.render(HI, true), "tiny-stack", 64 * 1024);
        small.start();
        assertTimeoutPreemptively(BOUND, (Executable) small::join);
        assertEquals("<s><｜User｜>hi<｜Assistant｜>", out[0]);
    }

    static ChatTemplate deepSeek() throws IOException {
        try (InputStream in = ChatTemplateSandboxTest.class
                .getClassLoader()
                .getResourceAsStream("tokenizers/deepseek-v3/tokenizer_config.json")) {
            String template =
                    new ObjectMapper().readTree(in).get("chat_template").asText();
            return new ChatTemplate(template, "<s>", "</s>");
        }
    }
}
