package dev.scorch.jobs.lmeval;

import java.nio.charset.StandardCharsets;
import java.util.Locale;

/** Python str operations lm-eval's metrics and filters use, with Python's notion of whitespace. */
public final class PyText {
    private PyText() {}

    /** {@code str.isspace} for one code point: Java's whitespace plus the no-break spaces and U+0085. */
    public static boolean isSpace(int cp) {
        return Character.isWhitespace(cp) || cp == 0x85 || cp == 0xA0 || cp == 0x2007 || cp == 0x202F;
    }

    /** {@code str.strip()}. */
    public static String strip(String s) {
        int start = 0;
        int end = s.length();
        while (start < end && isSpace(s.codePointAt(start))) {
            start += Character.charCount(s.codePointAt(start));
        }
        while (end > start && isSpace(s.codePointBefore(end))) {
            end -= Character.charCount(s.codePointBefore(end));
        }
        return s.substring(start, end);
    }

    /** {@code str.lstrip()}. */
    public static String lstrip(String s) {
        int start = 0;
        while (start < s.length() && isSpace(s.codePointAt(start))) {
            start += Character.charCount(s.codePointAt(start));
        }
        return s.substring(start);
    }

    /** {@code len(s)}: code points, not UTF-16 units. */
    public static int len(String s) {
        return s.codePointCount(0, s.length());
    }

    /** lm-eval's count_words: {@code len(re.split(r"\s+", s))}, i.e. the number of whitespace runs plus one. */
    public static long countWords(String s) {
        long runs = 0;
        boolean inRun = false;
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            boolean space = isSpace(cp);
            if (space && !inRun) {
                runs++;
            }
            inRun = space;
            i += Character.charCount(cp);
        }
        return runs + 1;
    }

    /** lm-eval's count_bytes: the UTF-8 length. */
    public static long countBytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8).length;
    }

    /** {@code str.lower()}. */
    public static String lower(String s) {
        return s.toLowerCase(Locale.ROOT);
    }

    /** {@code str.upper()}. */
    public static String upper(String s) {
        return s.toUpperCase(Locale.ROOT);
    }
}
