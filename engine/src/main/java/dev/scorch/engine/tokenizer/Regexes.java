package dev.scorch.engine.tokenizer;

import dev.scorch.engine.runtime.CountingText;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * Compiles the split patterns of tokenizer files (written for Oniguruma in Hugging Face tokenizers, for
 * Rust's regex/fancy-regex in tiktoken) with java.util.regex. The syntaxes agree on everything these
 * patterns use (classes with {@code \p{L}}/{@code \p{N}}/..., {@code &&} intersections, lookahead,
 * {@code (?i:...)}, possessive and atomic groups) except for:
 *
 * <ul>
 *   <li>{@code \s}, {@code \w}, {@code \d} are Unicode-aware there: compiled with UNICODE_CHARACTER_CLASS
 *       (so {@code \s} is the White_Space property, and {@code (?i)} folds case in Unicode);
 *   <li>script names: {@code \p{Han}} is written {@code \p{IsHan}} in Java;
 *   <li>{@code \v} is the vertical tab there but a class in Java;
 *   <li>{@code \h} is a hex digit in Oniguruma but horizontal space in Java.
 * </ul>
 */
final class Regexes {
    /** GPT-2's pattern, used by a ByteLevel pre-tokenizer with use_regex. */
    static final String GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

    private Regexes() {}

    static Pattern compile(String pattern) {
        String java = toJava(pattern);
        try {
            return Pattern.compile(java, Pattern.UNICODE_CHARACTER_CLASS);
        } catch (PatternSyntaxException e) {
            throw new IllegalArgumentException("cannot compile regex " + quote(pattern) + ": " + e.getDescription(), e);
        }
    }

    /** Rewrites the few constructs whose meaning differs (see the class comment). */
    static String toJava(String p) {
        StringBuilder sb = new StringBuilder(p.length() + 16);
        for (int i = 0; i < p.length(); i++) {
            char c = p.charAt(i);
            if (c != '\\' || i + 1 >= p.length()) {
                sb.append(c);
                continue;
            }
            char n = p.charAt(i + 1);
            if ((n == 'p' || n == 'P') && i + 2 < p.length() && p.charAt(i + 2) == '{') {
                int close = p.indexOf('}', i + 3);
                if (close < 0) {
                    sb.append(c);
                    continue;
                }
                String name = p.substring(i + 3, close);
                sb.append('\\').append(n).append('{').append(propertyName(name)).append('}');
                i = close;
            } else if (n == 'v') {
                sb.append("\\x0B");
                i++;
            } else if (n == 'h') {
                sb.append("[0-9a-fA-F]");
                i++;
            } else {
                sb.append(c).append(n);
                i++;
            }
        }
        return sb.toString();
    }

    /** General categories (L, Lu, N, ...) stay; other names are scripts or binary properties: IsName. */
    private static String propertyName(String name) {
        if (name.length() <= 2 && Character.isUpperCase(name.charAt(0))) {
            return name;
        }
        if (name.startsWith("Is") || name.startsWith("In") || name.contains("=")) {
            return name;
        }
        return "Is" + name;
    }

    /**
     * Steps (character reads) a pattern may take per character of the text it runs on, on top of
     * {@link #BASE_STEPS}: the patterns of real tokenizers read each character a few times (the alternatives
     * of GPT-2's pattern, a lookahead); a pattern that backtracks without bound ({@code ((a+)*)+b} reads
     * 2^n times) is stopped within milliseconds.
     */
    static final int STEPS_PER_CHAR = 1000;

    static final int BASE_STEPS = 1_000_000;

    /**
     * {@code text} for a Matcher to run on over {@code [start, end)}, counting the characters it reads:
     * java.util.regex cannot be interrupted, but it reads the text only through charAt.
     */
    static CharSequence bounded(String text, int start, int end) {
        return new CountingText(text, BASE_STEPS + (long) STEPS_PER_CHAR * Math.max(0, end - start));
    }

    /**
     * The error for a regex that was stopped on a piece of text: by the step budget of {@link #bounded} or
     * by the stack (java.util.regex recurses once per repetition of a group, so {@code (a|aa)+$} on 5,000
     * characters overflows it). The caller's thread is fine afterwards: the regex holds no shared state.
     */
    static TokenizerException stopped(String where, Pattern pattern, int chars, Throwable why) {
        String what = why instanceof StackOverflowError
                ? "overflowed the stack"
                : "backtracked past " + STEPS_PER_CHAR + " steps a character";
        return new TokenizerException(
                where + ": regex " + quote(pattern.pattern()) + " " + what + " on a text of " + chars + " characters",
                why);
    }

    static String quote(String s) {
        return "'" + s.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'";
    }
}
