package dev.scorch.jobs.lmeval.task;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The few Python behaviours lm-eval's prompt code leans on: {@code str.isdigit()}, {@code ast.literal_eval} of
 * literals (strings, numbers, True/False/None, lists, tuples, dicts), {@code str()} and {@code repr()} of the
 * values a document holds, and the type names its messages use.
 */
public final class Py {
    private Py() {}

    static String typeName(Object o) {
        if (o == null) {
            return "None";
        }
        if (o instanceof String) {
            return "str";
        }
        if (o instanceof Boolean) {
            return "bool";
        }
        if (o instanceof Integer || o instanceof Long || o instanceof BigInteger) {
            return "int";
        }
        if (o instanceof Number) {
            return "float";
        }
        if (o instanceof List<?>) {
            return "list";
        }
        if (o instanceof Map<?, ?>) {
            return "dict";
        }
        return o.getClass().getSimpleName();
    }

    /** Python's str.isdigit() for the text lm-eval tests (non-empty, every character a digit). */
    static boolean isDigit(String s) {
        if (s.isEmpty()) {
            return false;
        }
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            if (!Character.isDigit(cp) && Character.getType(cp) != Character.OTHER_NUMBER) {
                return false;
            }
            i += Character.charCount(cp);
        }
        return true;
    }

    /** Python's str() of a value. */
    public static String str(Object o) {
        return o instanceof String s ? s : repr(o);
    }

    /** Python's repr() of a value read from data or YAML. */
    public static String repr(Object o) {
        if (o == null) {
            return "None";
        }
        if (o instanceof Boolean b) {
            return b ? "True" : "False";
        }
        if (o instanceof String s) {
            return reprString(s);
        }
        if (o instanceof Double || o instanceof Float) {
            double d = ((Number) o).doubleValue();
            if (Double.isNaN(d)) {
                return "nan";
            }
            if (Double.isInfinite(d)) {
                return d > 0 ? "inf" : "-inf";
            }
            if (d == Math.rint(d) && Math.abs(d) < 1e16) {
                return (long) d + ".0";
            }
            return Double.toString(d);
        }
        if (o instanceof Number) {
            return o.toString();
        }
        if (o instanceof List<?> l) {
            List<String> parts = new ArrayList<>();
            for (Object x : l) {
                parts.add(repr(x));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        if (o instanceof Map<?, ?> m) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<?, ?> e : m.entrySet()) {
                parts.add(repr(e.getKey()) + ": " + repr(e.getValue()));
            }
            return "{" + String.join(", ", parts) + "}";
        }
        return o.toString();
    }

    static String reprString(String s) {
        char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder b = new StringBuilder().append(q);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c == q) {
                        b.append('\\').append(c);
                    } else if (c < 0x20 || c == 0x7f) {
                        b.append(String.format("\\x%02x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append(q).toString();
    }

    /** ast.literal_eval of a Python literal; IllegalArgumentException (naming the text) when it is not one. */
    static Object literalEval(String text) {
        Parser p = new Parser(text);
        p.ws();
        Object v = p.value();
        p.ws();
        if (p.i != text.length()) {
            throw p.fail("unexpected text");
        }
        return v;
    }

    private static final class Parser {
        final String s;
        int i;

        Parser(String s) {
            this.s = s;
        }

        IllegalArgumentException fail(String why) {
            String shown = s.length() > 200 ? s.substring(0, 200) + "..." : s;
            return new IllegalArgumentException("not a Python literal (" + why + " at character " + i + "): " + shown);
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        Object value() {
            if (i >= s.length()) {
                throw fail("end of text");
            }
            char c = s.charAt(i);
            if (c == '[') {
                return Collections.unmodifiableList(seq(']'));
            }
            if (c == '(') {
                return Collections.unmodifiableList(seq(')'));
            }
            if (c == '{') {
                return dict();
            }
            if (c == '\'' || c == '"') {
                StringBuilder b = new StringBuilder(string());
                while (true) { // adjacent literals concatenate
                    int save = i;
                    ws();
                    if (i < s.length() && (s.charAt(i) == '\'' || s.charAt(i) == '"')) {
                        b.append(string());
                    } else {
                        i = save;
                        return b.toString();
                    }
                }
            }
            // true/false too: Jinjava renders a boolean inside a list that way where Jinja2 writes True/False
            if (s.startsWith("True", i) || s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("False", i) || s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            if (s.startsWith("None", i)) {
                i += 4;
                return null;
            }
            return number();
        }

        List<Object> seq(char close) {
            i++;
            List<Object> out = new ArrayList<>();
            ws();
            while (i < s.length() && s.charAt(i) != close) {
                out.add(value());
                ws();
                if (i < s.length() && s.charAt(i) == ',') {
                    i++;
                    ws();
                } else if (i >= s.length() || s.charAt(i) != close) {
                    throw fail("expected ',' or '" + close + "'");
                }
            }
            if (i >= s.length()) {
                throw fail("missing '" + close + "'");
            }
            i++;
            return out;
        }

        Map<Object, Object> dict() {
            i++;
            Map<Object, Object> out = new LinkedHashMap<>();
            ws();
            while (i < s.length() && s.charAt(i) != '}') {
                Object k = value();
                ws();
                if (i >= s.length() || s.charAt(i) != ':') {
                    throw fail("expected ':'");
                }
                i++;
                ws();
                out.put(k, value());
                ws();
                if (i < s.length() && s.charAt(i) == ',') {
                    i++;
                    ws();
                } else if (i >= s.length() || s.charAt(i) != '}') {
                    throw fail("expected ',' or '}'");
                }
            }
            if (i >= s.length()) {
                throw fail("missing '}'");
            }
            i++;
            return Collections.unmodifiableMap(out);
        }

        String string() {
            char q = s.charAt(i++);
            StringBuilder b = new StringBuilder();
            while (i < s.length() && s.charAt(i) != q) {
                char c = s.charAt(i++);
                if (c == '\n') {
                    throw fail("newline in string");
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                if (i >= s.length()) {
                    break;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case '0' -> b.append('\0');
                    case '\\', '\'', '"' -> b.append(e);
                    case '\n' -> {}
                    case 'x' -> b.append((char) hex(2));
                    case 'u' -> b.append((char) hex(4));
                    case 'U' -> b.appendCodePoint(hex(8));
                    default -> b.append('\\').append(e);
                }
            }
            if (i >= s.length()) {
                throw fail("unterminated string");
            }
            i++;
            return b.toString();
        }

        int hex(int n) {
            if (i + n > s.length()) {
                throw fail("short escape");
            }
            int v = Integer.parseUnsignedInt(s.substring(i, i + n), 16);
            i += n;
            return v;
        }

        Object number() {
            int start = i;
            if (i < s.length() && (s.charAt(i) == '-' || s.charAt(i) == '+')) {
                i++;
            }
            while (i < s.length() && (Character.isLetterOrDigit(s.charAt(i)) || "._+-".indexOf(s.charAt(i)) >= 0)) {
                char c = s.charAt(i);
                if ((c == '+' || c == '-') && !(s.charAt(i - 1) == 'e' || s.charAt(i - 1) == 'E')) {
                    break;
                }
                i++;
            }
            String t = s.substring(start, i).replace("_", "");
            if (t.isEmpty() || t.equals("-") || t.equals("+")) {
                throw fail("expected a value");
            }
            String digits = t.startsWith("-") || t.startsWith("+") ? t.substring(1) : t;
            if (digits.chars().allMatch(Character::isDigit)) {
                if (digits.length() > 1
                        && digits.charAt(0) == '0'
                        && !digits.chars().allMatch(ch -> ch == '0')) {
                    throw fail("leading zeros in a decimal integer");
                }
                BigInteger v = new BigInteger(t);
                return v.bitLength() < 32 ? (Object) v.intValue() : v.bitLength() < 64 ? v.longValue() : v;
            }
            try {
                if (!digits.isEmpty() && (Character.isDigit(digits.charAt(0)) || digits.charAt(0) == '.')) {
                    return Double.parseDouble(t);
                }
            } catch (NumberFormatException e) {
                // below
            }
            i = start;
            throw fail("expected a value");
        }
    }
}
