package dev.scorch.jobs.lmeval;

import java.math.BigDecimal;
import java.util.Collection;
import java.util.Iterator;
import java.util.Map;

/**
 * Python's {@code json.dumps(obj, indent=..., ensure_ascii=False)} for the values lm-eval writes (maps, lists,
 * strings, numbers, booleans, null): the same separators, indentation and float text ({@code repr}: 0.1, 1e-05,
 * 1e+16, NaN), so that lm-eval's hashes of a dumped document ({@code doc_hash}) and its result files come out alike.
 */
public final class PyJson {
    private PyJson() {}

    /** indent null: one line, separators ", " and ": " as Python's default. */
    public static String dumps(Object o, Integer indent) {
        StringBuilder b = new StringBuilder();
        write(b, o, indent, 0);
        return b.toString();
    }

    private static void write(StringBuilder b, Object o, Integer indent, int level) {
        if (o == null) {
            b.append("null");
        } else if (o instanceof Boolean x) {
            b.append(x ? "true" : "false");
        } else if (o instanceof Double || o instanceof Float) {
            b.append(floatRepr(((Number) o).doubleValue()));
        } else if (o instanceof Number n) {
            b.append(n.toString());
        } else if (o instanceof CharSequence s) {
            string(b, s.toString());
        } else if (o instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                b.append("{}");
                return;
            }
            b.append('{');
            Iterator<? extends Map.Entry<?, ?>> it = m.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<?, ?> e = it.next();
                newline(b, indent, level + 1);
                string(b, String.valueOf(e.getKey()));
                b.append(": ");
                write(b, e.getValue(), indent, level + 1);
                if (it.hasNext()) {
                    b.append(indent == null ? ", " : ",");
                }
            }
            newline(b, indent, level);
            b.append('}');
        } else if (o instanceof Collection<?> c) {
            if (c.isEmpty()) {
                b.append("[]");
                return;
            }
            b.append('[');
            Iterator<?> it = c.iterator();
            while (it.hasNext()) {
                newline(b, indent, level + 1);
                write(b, it.next(), indent, level + 1);
                if (it.hasNext()) {
                    b.append(indent == null ? ", " : ",");
                }
            }
            newline(b, indent, level);
            b.append(']');
        } else {
            string(b, o.toString());
        }
    }

    private static void newline(StringBuilder b, Integer indent, int level) {
        if (indent != null) {
            b.append('\n').append(" ".repeat(indent * level));
        }
    }

    private static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    /**
     * Python's float repr: the shortest digits that read back to the same double, positional for exponents -4 to 15,
     * else d.ddde+XX / e-XX; NaN, Infinity, -Infinity as json.dumps writes them.
     */
    public static String floatRepr(double d) {
        if (Double.isNaN(d)) {
            return "NaN";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "Infinity" : "-Infinity";
        }
        if (d == 0) {
            return 1 / d < 0 ? "-0.0" : "0.0";
        }
        BigDecimal v = new BigDecimal(shortest(d)).stripTrailingZeros();
        String digits = v.unscaledValue().abs().toString();
        int exp = digits.length() - 1 - v.scale(); // decimal exponent of the first digit
        String sign = d < 0 ? "-" : "";
        if (exp >= -4 && exp < 16) {
            String plain = v.abs().toPlainString();
            return sign + (plain.contains(".") ? plain : plain + ".0");
        }
        String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        return sign + mant + "e" + (exp < 0 ? "-" : "+") + String.format("%02d", Math.abs(exp));
    }

    /** The shortest decimal that reads back to d (Java 17's Double.toString is not always the shortest). */
    private static String shortest(double d) {
        String s = Double.toString(d);
        for (int p = 0; p <= 17; p++) {
            String t = String.format(java.util.Locale.ROOT, "%." + p + "e", d);
            if (Double.parseDouble(t) == d) {
                return t;
            }
        }
        return s;
    }
}
