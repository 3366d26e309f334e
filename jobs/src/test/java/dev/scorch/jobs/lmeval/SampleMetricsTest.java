package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** Per-document metrics (acc, acc_norm, acc_bytes, acc_mutual_info, exact_match) and the rolling word/byte counts. */
class SampleMetricsTest {
    @Test
    void accPicksTheLargestLoglikelihoodAccNormDividesByCharacters() {
        // lls -4 and -6: acc picks 0; per char -4/2 = -2 vs -6/6 = -1: acc_norm picks 1
        var s = MultipleChoiceScore.of(
                List.of("ab", "cdefgh"), new double[] {-4, -6}, new boolean[] {false, true}, List.of(1), false, null);
        assertEquals(0.0, s.acc());
        assertEquals(1.0, s.accNorm());
        assertEquals(1, s.exactMatch());
        assertTrue(Double.isNaN(s.accMutualInfo()));
    }

    @Test
    void lengthsAreCodePointsAndBytesAreUtf8() {
        // "𝑥𝑦" is 2 code points (4 UTF-16 units, 8 bytes); "abc" 3 chars, 3 bytes
        // acc_norm: -3/2 = -1.5 vs -3.3/3 = -1.1 -> 1; acc_bytes: -3/8 = -0.375 vs -1.1 -> 0
        var s = MultipleChoiceScore.of(
                List.of("\uD835\uDC65\uD835\uDC66", "abc"),
                new double[] {-3, -3.3},
                new boolean[] {true, false},
                List.of(0),
                false,
                null);
        assertEquals(1.0, s.acc());
        assertEquals(0.0, s.accNorm());
        assertEquals(1.0, s.accBytes());
    }

    @Test
    void mutualInfoSubtractsUnconditionalLoglikelihoods() {
        // conditional -1, -2; unconditional -0.5, -3: differences -0.5, 1.0 -> choice 1
        var s = MultipleChoiceScore.of(
                List.of("a", "b"), new double[] {-1, -2}, new boolean[] {true, false}, List.of(1), false, new double[] {
                    -0.5, -3
                });
        assertEquals(0.0, s.acc());
        assertEquals(1.0, s.accMutualInfo());
        assertEquals(0, s.exactMatch());
    }

    @Test
    void tiesGoToTheFirstAndNanWins() {
        assertEquals(0, MultipleChoiceScore.argmax(new double[] {-1, -1, -2}));
        assertEquals(2, MultipleChoiceScore.argmax(new double[] {-1, 0, Double.NaN, 5}));
    }

    @Test
    void multipleTargetsAndInvalidGolds() {
        var s = MultipleChoiceScore.of(
                List.of("a", "b", "c"),
                new double[] {-3, -1, -2},
                new boolean[] {false, false, true},
                List.of(1, 2),
                true,
                null);
        assertEquals(1.0, s.acc());
        assertEquals(1, s.exactMatch());
        // gold 5 of 3 choices becomes -100: nothing matches
        var bad = MultipleChoiceScore.of(
                List.of("a", "b", "c"),
                new double[] {-3, -1, -2},
                new boolean[] {true, true, true},
                List.of(5),
                false,
                null);
        assertEquals(0.0, bad.acc());
        assertEquals(0, bad.exactMatch());
        assertEquals(1, MultipleChoiceScore.goldIndex("b", List.of("a", "b")));
        assertEquals(-100, MultipleChoiceScore.goldIndex("z", List.of("a", "b")));
        assertEquals(3, MultipleChoiceScore.goldIndex(3L, List.of("a", "b")));
    }

    @Test
    void exactMatchOptionsApplyInHfEvaluatesOrder() {
        assertEquals(0.0, ExactMatch.plain().score("The Answer", "the answer"));
        assertEquals(1.0, new ExactMatch(List.of(), true, false, false).score("The Answer", "the answer"));
        assertEquals(1.0, new ExactMatch(List.of(), false, true, false).score("a,b.c!", "abc"));
        assertEquals(1.0, new ExactMatch(List.of(), false, false, true).score("a1b2", "ab"));
        // regexes first: "Answer: " removed, then case
        assertEquals(
                1.0, new ExactMatch(List.of("Answer: ", "\\.$"), true, false, false).score("Answer: Paris.", "paris"));
        // any of several references
        assertEquals(1.0, ExactMatch.plain().score("b", List.of("a", "b")));
        assertEquals(0.0, ExactMatch.plain().score("c", List.of("a", "b")));
    }

    @Test
    void rollingCountsAsLmEval() {
        // len(re.split(r"\s+", s)): runs of whitespace + 1, ends included
        assertEquals(3, PyText.countWords("a b  c"));
        assertEquals(3, PyText.countWords(" a b"));
        assertEquals(1, PyText.countWords(""));
        assertEquals(2, PyText.countWords("a\u00a0b"));
        assertEquals(2, PyText.countWords("a\u001cb"));
        assertEquals(4, PyText.countBytes("é\u00e9"));
        assertEquals("x", PyText.strip("\u00a0 x\u2007\n"));
    }

    @Test
    void pythonTextAgreesWithLivePython() {
        String[] samples = {
            "a b  c",
            " lead",
            "tail\n",
            "x\u00a0y\u2007z\u202fw",
            "p\u0085q\u001cr\u001ds",
            "\u3000\u2028",
            "ΣΑΣ ὈΔΥΣΣΕΎΣ",
            "İstanbul ß ﬁ",
            "tab\tsep\u000bx\u000cy"
        };
        StringBuilder lit = new StringBuilder("[");
        for (String s : samples) {
            lit.append('"');
            s.codePoints().forEach(cp -> lit.append(String.format("\\U%08x", cp)));
            lit.append("\",");
        }
        lit.append(']');
        String out = Python3.run(
                "import re\nfor s in " + lit + ":\n"
                        + "    print(len(re.split(r'\\s+', s)), len(s.encode('utf-8')), len(s), s.strip().encode('unicode_escape').decode(), s.lower().encode('unicode_escape').decode(), s.upper().encode('unicode_escape').decode(), sep='|')");
        String[] lines = out.strip().split("\n");
        for (int i = 0; i < samples.length; i++) {
            String s = samples[i];
            String[] f = lines[i].split("\\|", -1);
            assertEquals(Long.parseLong(f[0]), PyText.countWords(s), "words " + i);
            assertEquals(Long.parseLong(f[1]), PyText.countBytes(s), "bytes " + i);
            assertEquals(Integer.parseInt(f[2]), PyText.len(s), "len " + i);
            assertEquals(f[3], escape(PyText.strip(s)), "strip " + i);
            assertEquals(f[4], escape(PyText.lower(s)), "lower " + i);
            assertEquals(f[5], escape(PyText.upper(s)), "upper " + i);
        }
    }

    /** Python's unicode_escape, enough for these samples. */
    private static String escape(String s) {
        StringBuilder b = new StringBuilder();
        s.codePoints().forEach(cp -> {
            if (cp == '\t') b.append("\\t");
            else if (cp == '\n') b.append("\\n");
            else if (cp == '\r') b.append("\\r");
            else if (cp == '\\') b.append("\\\\");
            else if (cp < 0x20 || (cp >= 0x7f && cp < 0x100)) b.append(String.format("\\x%02x", cp));
            else if (cp < 0x7f) b.appendCodePoint(cp);
            else if (cp < 0x10000) b.append(String.format("\\u%04x", cp));
            else b.append(String.format("\\U%08x", cp));
        });
        return b.toString();
    }
}
