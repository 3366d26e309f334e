package dev.scorch.jobs.lmeval.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DocTemplatesTest {
    private static final DocTemplates T = new DocTemplates();

    @Test
    void rendersFieldsKeepingTheTrailingNewline() {
        assertEquals("Q: a?\n", T.render("Q: {{q}}\n", Map.of("q", "a?")));
        assertEquals("x\n\n", T.render("{{q}}\n\n", Map.of("q", "x")));
    }

    @Test
    void anUndefinedNameIsAnError() {
        String m = assertThrows(IllegalArgumentException.class, () -> T.render("{{missing}}", Map.of("q", 1)))
                .getMessage();
        assertTrue(m.contains("missing"), m);
    }

    @Test
    void splitIsPythonsSplit() {
        Map<String, Object> d = Map.of("text", "the cat  sat.");
        assertEquals("sat.", T.render("{{text.split(' ')[-1]}}", d));
        assertEquals("the cat ", T.render("{{text.split(' ')[:-1]|join(' ')}}", d));
        assertEquals(List.of("a", "", "b", ""), DocTemplates.split("a,,b,", ",", -1));
        assertEquals(List.of("a", "b c"), DocTemplates.split(" a  b c ", null, 1));
    }

    @Test
    void pythonStringMethods() {
        Map<String, Object> d = Map.of("t", "  aB c  ", "l", List.of("x", "y"));
        assertEquals("  ab c  ", T.render("{{t.lower()}}", d));
        assertEquals("  AB C  ", T.render("{{t.upper()}}", d));
        assertEquals("aB c", T.render("{{t.strip()}}", d));
        assertEquals("aB c  ", T.render("{{t.lstrip()}}", d));
        assertEquals("B", T.render("{{t.strip(' ac')}}", d));
        assertEquals("Ab c", T.render("{{t.strip().capitalize()}}", d));
        assertEquals("true", T.render("{{t.strip().startswith('aB')}}", d));
        assertEquals("x, y", T.render("{{', '.join(l)}}", d));
        assertEquals("  xB c  ", T.render("{{t.replace('a', 'x')}}", d));
    }

    @Test
    void regexReplaceIsReSub() {
        Map<String, Object> d = Map.of("t", "a1b22c");
        assertEquals("a#b#c", T.render("{{t|regex_replace('[0-9]+', '#')}}", d));
        assertEquals("a<1>b<22>c", T.render("{{t|regex_replace('([0-9]+)', '<\\\\1>')}}", d));
        assertEquals("a#b22c", T.render("{{t|regex_replace('[0-9]+', '#', 1)}}", d));
    }

    @Test
    void listsRenderAsPythonLiteralsReadBack() {
        Map<String, Object> d = Map.of("a", "it's", "b", "x");
        String out = T.render("{{[a, b]}}", d);
        assertEquals(List.of("it's", "x"), Py.literalEval(out));
        assertEquals(List.of("p", "q"), Py.literalEval(T.render("{{c}}", Map.of("c", List.of("p", "q")))));
    }

    @Test
    void booleansInsideRenderedListsReadBack() {
        // Jinjava writes true where Jinja2 writes True; reading a rendered list back accepts both
        assertEquals(List.of(1, 2.5, true), Py.literalEval(T.render("{{ [1, 2.5, b] }}", Map.of("b", true))));
    }

    @Test
    void refusedMethodsAndFilters() {
        assertThrows(IllegalArgumentException.class, () -> T.render("{{ t.repeat(5) }}", Map.of("t", "a")));
        assertThrows(IllegalArgumentException.class, () -> T.render("{{ t|fromjson }}", Map.of("t", "[]")));
        assertThrows(IllegalArgumentException.class, () -> T.render("{% include 'x' %}", Map.of()));
        assertThrows(
                IllegalArgumentException.class,
                () -> T.render("{{" + "(".repeat(150) + "1" + ")".repeat(150) + "}}", Map.of()));
    }

    @Test
    void literalEvalReadsPythonLiterals() {
        assertEquals(List.of("a", 1, 2.5, true, "b'c"), Py.literalEval("['a', 1, 2.5, True, \"b'c\"]"));
        assertEquals(List.of("x", "y"), Py.literalEval("('x', 'y')"));
        assertEquals(Map.of("k", List.of()), Py.literalEval("{'k': []}"));
        assertEquals(7, Py.literalEval(" 7 "));
        assertThrows(IllegalArgumentException.class, () -> Py.literalEval("[a, b]"));
        assertThrows(IllegalArgumentException.class, () -> Py.literalEval("07"));
        assertEquals("'it\\'s \"q\"'", Py.repr("it's \"q\""));
        assertEquals("\"it's\"", Py.repr("it's"));
    }
}
