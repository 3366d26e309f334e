package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** lm-eval's filters and the Python-to-Java regex translation. */
class FiltersTest {
    private static ResponseFilter regex(String pattern, int group, String fallback) {
        return ResponseFilter.named(
                "regex", Map.of("regex_pattern", pattern, "group_select", group, "fallback", fallback));
    }

    @Test
    void regexFilterAsGsm8k() {
        // gsm8k's strict-match: "#### (\-?[0-9\.\,]+)"
        var strict = ResponseFilter.named("regex", Map.of());
        assertEquals(List.of("42", "[invalid]"), strict.apply(List.of("so #### 42\n", "no answer")));
        // gsm8k's flexible-extract: the last of two groups' first non-empty
        var flex = regex("(-?[$0-9.,]{2,})|(-?[0-9]+)", -1, "[invalid]");
        assertEquals(List.of("7", "$1,000"), flex.apply(List.of("3 then 7", "$1,000 in total")));
    }

    @Test
    void regexFilterFallbacksAndStripping() {
        // one group matching empty text: "" (no fallback)
        assertEquals(List.of(""), regex("x(a*)", 0, "F").apply(List.of("xb")));
        // several groups all empty: the fallback, stripped
        assertEquals(List.of("F"), regex("x(a*)(b*)", 0, " F ").apply(List.of("xc")));
        // no match: the fallback as is
        assertEquals(List.of(" F "), regex("z", 0, " F ").apply(List.of("xc")));
        // the whole match when there is no group, stripped; group_select picks the match
        assertEquals(List.of("b"), regex("\\s?[a-z]\\s?", 1, "F").apply(List.of("a b c")));
        assertThrows(IndexOutOfBoundsException.class, () -> regex("a", 3, "F").apply(List.of("aa")));
    }

    @Test
    void simpleFiltersAndPipelines() {
        assertEquals(List.of("ab"), ResponseFilter.named("lowercase", null).apply(List.of("AB")));
        assertEquals(List.of("AB"), ResponseFilter.named("uppercase", null).apply(List.of("ab")));
        assertEquals(
                List.of("a b"), ResponseFilter.named("remove_whitespace", null).apply(List.of(" a b\u00a0\n")));
        var p = FilterEnsemble.of(
                "strict",
                List.of(
                        Map.entry("regex", Map.<String, Object>of("regex_pattern", "answer is (\\w+)")),
                        Map.entry("lowercase", Map.of()),
                        Map.entry("take_first", Map.of())));
        assertEquals(List.of("paris"), p.apply(List.of("The answer is PARIS.", "the answer is Rome")));
        assertTrue(p.yieldsOne());
        assertEquals(List.of("x"), FilterEnsemble.none().apply(List.of("x", "y")));
        assertThrows(
                IllegalArgumentException.class,
                () -> FilterEnsemble.of(
                        "bad", List.of(Map.entry("take_first", Map.of()), Map.entry("lowercase", Map.of()))));
        var e = assertThrows(IllegalArgumentException.class, () -> ResponseFilter.named("multi_choice_regex", null));
        assertTrue(e.getMessage().contains("multi_choice_regex"));
    }

    @Test
    void translation() {
        assertEquals("(?<num>\\d+)\\k<num>", PyRegex.translate("(?P<num>\\d+)(?P=num)"));
        assertEquals("(?<pyg0x>a)", PyRegex.translate("(?P<my_name>a)"));
        assertEquals("a\\z", PyRegex.translate("a\\Z"));
        assertEquals("\\{x\\}a{0,3}b{2,}", PyRegex.translate("{x}a{,3}b{2,}"));
        assertEquals("[\\[a]", PyRegex.translate("[[a]"));
        assertEquals("ab", PyRegex.translate("a(?#note)b"));
        var e = assertThrows(IllegalArgumentException.class, () -> PyRegex.compile("(a)?(?(1)b|c)"));
        assertTrue(e.getMessage().contains("(a)?(?(1)b|c)"));
        assertThrows(IllegalArgumentException.class, () -> PyRegex.compile("(?a)\\w"));
    }

    @Test
    void findallAgreesWithLivePython() {
        String[] patterns = {
            "#### (\\-?[0-9\\.\\,]+)",
            "(-?[$0-9.,]{2,})|(-?[0-9]+)",
            "\\d*",
            "(?P<a>[A-D])\\)",
            "\\w+",
            "\\s+",
            "[^\\W\\d]+",
            "The answer is (.*?)\\.",
            "(?i)answer:\\s*(\\S+)",
            "^\\s*(.+)$",
            "a{,2}",
            "{x}",
            "[]a]+",
            "x\\b",
            ".+",
            "(\\d+)(?:,(\\d+))?"
        };
        String[] texts = {
            "#### -1,234.5\nand #### 7",
            "12 apples, $3.50 and 7",
            "a12b3",
            "A) x B) y",
            "héllo wörld ½ ²3 a\u0301",
            "a \u00a0\u2007\u001c b",
            "The answer is Paris. The answer is 4.",
            "ANSWER:  b\nanswer: c",
            "  first\nsecond\n",
            "aaa{x}]a",
            "x.\nyx",
            "1,2 3"
        };
        StringBuilder script = new StringBuilder("import re\nps=[");
        for (String p : patterns) script.append(pyLiteral(p)).append(',');
        script.append("]\nts=[");
        for (String t : texts) script.append(pyLiteral(t)).append(',');
        script.append("]\nfor p in ps:\n  for t in ts:\n    r=re.findall(p,t)\n"
                + "    r=[list(x) if isinstance(x,tuple) else [x] for x in r]\n"
                + "    print(ascii(r))\n");
        String[] lines = Python3.run(script.toString()).strip().split("\n");
        int at = 0;
        for (String p : patterns) {
            PyRegex r = PyRegex.compile(p);
            for (String t : texts) {
                assertEquals(lines[at++], ascii(r.findall(t)), "pattern " + p + " on " + t);
            }
        }
    }

    private static String pyLiteral(String s) {
        StringBuilder b = new StringBuilder("'");
        s.codePoints().forEach(cp -> b.append(String.format("\\U%08x", cp)));
        return b.append('\'').toString();
    }

    /** Python's ascii() of a list of lists of str. */
    private static String ascii(List<List<String>> rows) {
        List<String> outer = new ArrayList<>();
        for (List<String> row : rows) {
            List<String> inner = new ArrayList<>();
            for (String s : row) inner.add(asciiStr(s));
            outer.add("[" + String.join(", ", inner) + "]");
        }
        return "[" + String.join(", ", outer) + "]";
    }

    private static String asciiStr(String s) {
        char q = s.contains("'") && !s.contains("\"") ? '"' : '\'';
        StringBuilder b = new StringBuilder().append(q);
        s.codePoints().forEach(cp -> {
            if (cp == q || cp == '\\') b.append('\\').appendCodePoint(cp);
            else if (cp == '\n') b.append("\\n");
            else if (cp == '\t') b.append("\\t");
            else if (cp == '\r') b.append("\\r");
            else if (cp < 0x20 || (cp >= 0x7f && cp < 0x100)) b.append(String.format("\\x%02x", cp));
            else if (cp < 0x7f) b.appendCodePoint(cp);
            else if (cp < 0x10000) b.append(String.format("\\u%04x", cp));
            else b.append(String.format("\\U%08x", cp));
        });
        return b.append(q).toString();
    }

    @Test
    void majorityVoteKeepsTheMostFrequentResponseTheFirstSeenOnATie() {
        var vote = ResponseFilter.named("majority_vote", null);
        assertEquals(List.of("b"), vote.apply(List.of("a", "b", "c", "b")));
        // a tie: Counter.most_common(1) gives the response counted first
        assertEquals(List.of("c"), vote.apply(List.of("c", "a", "a", "c")));
        assertEquals(List.of("x"), vote.apply(List.of("x")));
        // majority_vote then take_first: one string
        var p = FilterEnsemble.of(
                "maj", List.of(Map.entry("majority_vote", Map.of()), Map.entry("take_first", Map.of())));
        assertEquals(List.of("b"), p.apply(List.of("a", "b", "b")));
        assertTrue(p.yieldsOne());
    }

    @Test
    void takeFirstKKeepsTheFirstKRepeats() {
        var first2 = ResponseFilter.named("take_first_k", Map.of("k", 2));
        assertEquals(List.of("a", "b"), first2.apply(List.of("a", "b", "c")));
        // fewer responses than k: lm-eval's assertion
        assertThrows(IllegalArgumentException.class, () -> first2.apply(List.of("a")));
        assertThrows(IllegalArgumentException.class, () -> ResponseFilter.named("take_first_k", Map.of()));
    }

    @Test
    void exactMatchOfAListOfResponsesAsNumpyComparesThem() {
        ExactMatch em = ExactMatch.plain();
        // one target: the fraction of responses equal to it
        assertEquals(2.0 / 3, em.scoreAll(List.of("4", "5", "4"), List.of("4"), false), 1e-15);
        assertEquals(0.0, em.scoreAll(List.of("x", "y"), List.of("4"), false));
        // normalisation applies to every response
        var ci = new ExactMatch(List.of(), true, false, false);
        assertEquals(1.0, ci.scoreAll(List.of("Paris", "PARIS"), List.of("paris"), false));
        // several targets: response j against target j; one response against any target
        assertEquals(1.0, em.scoreAll(List.of("a", "y"), List.of("x", "y"), true));
        assertEquals(0.0, em.scoreAll(List.of("y", "x"), List.of("x", "y"), true));
        assertEquals(1.0, em.scoreAll(List.of("y"), List.of("x", "y"), true));
        // shapes numpy cannot compare, and regexes_to_ignore on a list, fail in lm-eval: refused
        assertThrows(
                IllegalArgumentException.class, () -> em.scoreAll(List.of("a", "b", "c"), List.of("x", "y"), true));
        assertThrows(
                IllegalArgumentException.class,
                () -> new ExactMatch(List.of(","), false, false, false).scoreAll(List.of("a"), List.of("a"), false));
    }
}
