package dev.scorch.jobs.lmeval;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * A Python {@code re} pattern (as lm-eval task YAMLs write them) translated to a java.util.regex Pattern, with
 * Python's {@code findall} and {@code sub}. Compiled with UNICODE_CHARACTER_CLASS (Python str patterns are Unicode)
 * and UNIX_LINES (only \n ends a line for {@code . ^ $}, as in Python). Translated: {@code (?P<name>…)},
 * {@code (?P=name)}, {@code (?#…)} comments, {@code \Z}, {@code \v}, {@code \U}, octal {@code \0}, {@code \s \S \w \W}
 * (Python's sets), {@code [} and {@code &} and a leading {@code ]} inside a class, and a {@code {} that is no
 * quantifier, and {@code {,n}}. Refused with the pattern named: conditionals {@code (?(…)}, {@code (?P>…)} and the
 * ASCII/LOCALE flags {@code (?a)}/{@code (?L)}. Known remaining differences: {@code \b} uses Java's word characters
 * (which include combining marks), and case-insensitive matching folds as Java does.
 */
public final class PyRegex {
    private static final String PY_SPACE = "\\s\\x1c-\\x1f";
    private static final String PY_WORD = "\\p{L}\\p{N}_";

    private final String python;
    private final Pattern pattern;

    private PyRegex(String python, Pattern pattern) {
        this.python = python;
        this.pattern = pattern;
    }

    public static PyRegex compile(String python) {
        String java = translate(python);
        try {
            return new PyRegex(python, Pattern.compile(java, Pattern.UNICODE_CHARACTER_CLASS | Pattern.UNIX_LINES));
        } catch (PatternSyntaxException e) {
            throw new IllegalArgumentException(
                    "regex '" + python + "' cannot be used (translated to '" + java + "'): " + e.getDescription(), e);
        }
    }

    public String python() {
        return python;
    }

    public Pattern pattern() {
        return pattern;
    }

    public int groupCount() {
        return pattern.matcher("").groupCount();
    }

    /**
     * {@code re.findall}: per match, the whole match when the pattern has no group, else the groups (an unmatched
     * group as ""); a one-group match is a one-element list.
     */
    public List<List<String>> findall(String s) {
        List<List<String>> out = new ArrayList<>();
        Matcher m = pattern.matcher(s);
        int groups = m.groupCount();
        while (m.find()) {
            List<String> row = new ArrayList<>(Math.max(1, groups));
            if (groups == 0) {
                row.add(m.group());
            } else {
                for (int g = 1; g <= groups; g++) {
                    String v = m.group(g);
                    row.add(v == null ? "" : v);
                }
            }
            out.add(row);
        }
        return out;
    }

    /** {@code re.sub(pattern, "", s)}. */
    public String removeAll(String s) {
        return pattern.matcher(s).replaceAll("");
    }

    static String translate(String p) {
        StringBuilder out = new StringBuilder(p.length() + 16);
        Map<String, String> names = new HashMap<>();
        boolean inClass = false;
        int i = 0;
        int n = p.length();
        while (i < n) {
            char c = p.charAt(i);
            if (c == '\\') {
                if (i + 1 >= n) {
                    throw refuse(p, "it ends with a lone backslash");
                }
                char e = p.charAt(i + 1);
                i += 2;
                switch (e) {
                    case 'Z' -> out.append(inClass ? "Z" : "\\z");
                    case 'v' -> out.append("\\x0B");
                    case 'b' -> out.append(inClass ? "\\x08" : "\\b");
                    case 's' -> out.append(inClass ? PY_SPACE : "[" + PY_SPACE + "]");
                    case 'S' -> out.append(inClass ? "[^" + PY_SPACE + "]" : "[^" + PY_SPACE + "]");
                    case 'w' -> out.append(inClass ? PY_WORD : "[" + PY_WORD + "]");
                    case 'W' -> out.append("[^" + PY_WORD + "]");
                    case 'U' -> {
                        if (i + 8 > n) {
                            throw refuse(p, "\\U needs 8 hex digits");
                        }
                        out.append("\\x{").append(p, i, i + 8).append('}');
                        i += 8;
                    }
                    case '0' -> {
                        int j = i;
                        while (j < n && j < i + 2 && p.charAt(j) >= '0' && p.charAt(j) <= '7') {
                            j++;
                        }
                        int v = j == i ? 0 : Integer.parseInt(p.substring(i, j), 8);
                        out.append("\\x{").append(Integer.toHexString(v)).append('}');
                        i = j;
                    }
                    default -> out.append('\\').append(e);
                }
                continue;
            }
            if (inClass) {
                if (c == ']') {
                    inClass = false;
                    out.append(']');
                } else if (c == '[' || c == '&') {
                    out.append('\\').append(c);
                } else {
                    out.append(c);
                }
                i++;
                continue;
            }
            switch (c) {
                case '[' -> {
                    inClass = true;
                    out.append('[');
                    i++;
                    if (i < n && p.charAt(i) == '^') {
                        out.append('^');
                        i++;
                    }
                    if (i < n && p.charAt(i) == ']') {
                        out.append("\\]");
                        i++;
                    }
                }
                case '{' -> i = quantifierOrLiteral(p, i, out);
                case '}' -> {
                    out.append("\\}");
                    i++;
                }
                case '(' -> i = group(p, i, out, names);
                default -> {
                    out.append(c);
                    i++;
                }
            }
        }
        if (inClass) {
            throw refuse(p, "a character class is not closed");
        }
        return out.toString();
    }

    /** Python's rule: {m}, {m,}, {,n}, {m,n} and {,} are quantifiers; any other '{' is a literal. */
    private static int quantifierOrLiteral(String p, int at, StringBuilder out) {
        int i = at + 1;
        int loStart = i;
        while (i < p.length() && Character.isDigit(p.charAt(i)) && p.charAt(i) < 128) {
            i++;
        }
        String lo = p.substring(loStart, i);
        String hi = lo;
        boolean comma = false;
        if (i < p.length() && p.charAt(i) == ',') {
            comma = true;
            i++;
            int hiStart = i;
            while (i < p.length() && Character.isDigit(p.charAt(i)) && p.charAt(i) < 128) {
                i++;
            }
            hi = p.substring(hiStart, i);
        }
        boolean closed = i < p.length() && p.charAt(i) == '}';
        if (!closed || (!comma && lo.isEmpty())) {
            out.append("\\{");
            return at + 1;
        }
        out.append('{').append(lo.isEmpty() ? "0" : lo);
        if (comma) {
            out.append(',').append(hi);
        }
        out.append('}');
        return i + 1;
    }

    private static int group(String p, int at, StringBuilder out, Map<String, String> names) {
        if (p.startsWith("(?P<", at)) {
            int end = p.indexOf('>', at + 4);
            if (end < 0) {
                throw refuse(p, "a named group is not closed");
            }
            String name = p.substring(at + 4, end);
            String java = name.matches("[a-zA-Z][a-zA-Z0-9]*") ? name : "pyg" + names.size() + "x";
            names.put(name, java);
            out.append("(?<").append(java).append('>');
            return end + 1;
        }
        if (p.startsWith("(?P=", at)) {
            int end = p.indexOf(')', at + 4);
            String name = end < 0 ? null : names.get(p.substring(at + 4, end));
            if (name == null) {
                throw refuse(p, "a (?P=name) back reference names no earlier group");
            }
            out.append("\\k<").append(name).append('>');
            return end + 1;
        }
        if (p.startsWith("(?#", at)) {
            int end = p.indexOf(')', at);
            if (end < 0) {
                throw refuse(p, "a (?# comment is not closed");
            }
            return end + 1;
        }
        if (p.startsWith("(?(", at) || p.startsWith("(?P>", at)) {
            throw refuse(p, "conditional groups and (?P> have no java.util.regex equivalent");
        }
        if (p.startsWith("(?", at)) {
            int j = at + 2;
            while (j < p.length() && Character.isLetter(p.charAt(j))) {
                if (p.charAt(j) == 'a' || p.charAt(j) == 'L') {
                    throw refuse(p, "the ASCII/LOCALE flags (?a)/(?L) are not supported");
                }
                j++;
            }
        }
        out.append('(');
        return at + 1;
    }

    private static IllegalArgumentException refuse(String p, String why) {
        return new IllegalArgumentException("regex '" + p + "' cannot be translated from Python to Java: " + why);
    }
}
