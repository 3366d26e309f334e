package dev.scorch.jobs.lmeval.task;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.interpret.Context;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.filter.Filter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * Renders lm-eval's prompt templates (doc_to_text, doc_to_target, doc_to_choice, description, gen_prefix) with
 * Jinjava as lm-eval renders them with Jinja2: an undefined name is an error (StrictUndefined), a trailing
 * newline is kept, no trim_blocks or lstrip_blocks, the document's fields are the variables, and the
 * {@code regex_replace(pattern, repl, count=0)} filter does Python's re.sub.
 *
 * <p>The engine's chat-template sandbox is package-private there, so this holds templates to the same
 * numbers: 64 Mi characters for any string and the output, 1,000,000 items for any list, map or range,
 * 100 levels of bracket nesting; no template may read another (include, import, extends) or render text as
 * a template (the render, fromyaml and fromjson filters, nested interpretation); {@code split} splits on the
 * literal text as Python's str.split does, and the Java methods that run a regex the template chose or
 * allocate what an argument asks are refused. Unlike the engine's sandbox there is no CPU-time bound: task
 * files are the operator's own configuration, not a checkpoint's.
 */
public final class DocTemplates {
    static final long MAX_STRING_CHARS = 64L << 20;
    static final int MAX_ITEMS = 1_000_000;
    static final int MAX_BRACKET_DEPTH = 100;
    private static final Set<String> REFUSED_FILTERS = Set.of("render", "fromyaml", "fromjson");
    private static final Set<String> REFUSED_METHODS = Set.of(
            "matches", "replaceAll", "replaceFirst", "splitWithDelimiters", "repeat", "indent", "format", "formatted");

    private final Jinjava jinjava;

    public DocTemplates() {
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withFailOnUnknownTokens(true)
                // a list or dict renders as Python writes it (['a', 'b']), which doc_to_choice reads back
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withUsePyishObjectMapper(true)
                        .build())
                .withNestedInterpretationEnabled(false)
                .withMaxOutputSize(MAX_STRING_CHARS)
                .withMaxStringLength(MAX_STRING_CHARS)
                .withMaxListSize(MAX_ITEMS)
                .withMaxMapSize(MAX_ITEMS)
                .withRangeLimit(MAX_ITEMS)
                .withDisabled(Map.of(Context.Library.FILTER, REFUSED_FILTERS))
                .withElResolver(new Resolver(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY))
                .build();
        jinjava = new Jinjava(config);
        jinjava.setResourceLocator((name, encoding, interpreter) -> {
            throw new java.io.IOException("a task template may not read other templates or files (" + name + ")");
        });
        jinjava.getGlobalContext().registerFilter(new RegexReplace());
    }

    /** The template rendered with the document's fields; IllegalArgumentException naming the template on failure. */
    public String render(String template, Map<String, ?> doc) {
        int depth = bracketDepth(template);
        if (depth > MAX_BRACKET_DEPTH) {
            throw new IllegalArgumentException("template nests brackets " + depth + " deep, over the limit of "
                    + MAX_BRACKET_DEPTH + ": " + shorten(template));
        }
        RenderResult result;
        try {
            result = jinjava.renderForResult(template, Map.copyOf(nonNull(doc)));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("template " + shorten(template) + " failed: " + e.getMessage(), e);
        }
        for (TemplateError e : result.getErrors()) {
            if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
                throw new IllegalArgumentException("template " + shorten(template) + " failed at line " + e.getLineno()
                        + ": " + shorten(String.valueOf(e.getMessage())));
            }
        }
        return result.getOutput();
    }

    /** Jinjava's context is a map that holds no nulls; a null field becomes Python's None as text. */
    private static Map<String, Object> nonNull(Map<String, ?> doc) {
        Map<String, Object> out = new java.util.HashMap<>();
        for (Map.Entry<String, ?> e : doc.entrySet()) {
            out.put(e.getKey(), e.getValue() == null ? "None" : e.getValue());
        }
        return out;
    }

    static String shorten(String s) {
        s = s.replace("\n", "\\n");
        return "'" + (s.length() <= 200 ? s : s.substring(0, 200) + "...") + "'";
    }

    static int bracketDepth(String t) {
        int max = 0;
        int depth = 0;
        for (int i = 0; i < t.length(); i++) {
            char c = t.charAt(i);
            if (c == '(' || c == '[' || c == '{') {
                max = Math.max(max, ++depth);
            } else if (c == ')' || c == ']' || c == '}') {
                depth = Math.max(0, depth - 1);
            }
        }
        return max;
    }

    /** Python's re.sub as the filter lm-eval registers: (value, pattern, repl, count=0). */
    private static final class RegexReplace implements Filter {
        @Override
        public String getName() {
            return "regex_replace";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            if (args.length < 2) {
                throw new IllegalArgumentException("regex_replace takes a pattern and a replacement");
            }
            int count = args.length > 2 ? Integer.parseInt(args[2].strip()) : 0;
            Matcher m = Pattern.compile(args[0]).matcher(Py.str(var));
            StringBuilder b = new StringBuilder();
            int n = 0;
            while ((count == 0 || n < count) && m.find()) {
                m.appendReplacement(b, Matcher.quoteReplacement(expand(args[1], m)));
                n++;
            }
            m.appendTail(b);
            return b.toString();
        }

        /** Python's template expansion: \1, \g<1>, \g<name>, and the character escapes. */
        private static String expand(String repl, Matcher m) {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < repl.length(); i++) {
                char c = repl.charAt(i);
                if (c != '\\' || i + 1 >= repl.length()) {
                    b.append(c);
                    continue;
                }
                char e = repl.charAt(++i);
                if (Character.isDigit(e)) {
                    int j = i + 1;
                    if (j < repl.length() && Character.isDigit(repl.charAt(j))) {
                        j++;
                    }
                    String g = m.group(Integer.parseInt(repl.substring(i, j)));
                    b.append(g == null ? "" : g);
                    i = j - 1;
                } else if (e == 'g' && i + 1 < repl.length() && repl.charAt(i + 1) == '<') {
                    int close = repl.indexOf('>', i);
                    String name = repl.substring(i + 2, close);
                    String g =
                            name.chars().allMatch(Character::isDigit) ? m.group(Integer.parseInt(name)) : m.group(name);
                    b.append(g == null ? "" : g);
                    i = close;
                } else {
                    switch (e) {
                        case 'n' -> b.append('\n');
                        case 't' -> b.append('\t');
                        case 'r' -> b.append('\r');
                        case '\\' -> b.append('\\');
                        default -> b.append('\\').append(e);
                    }
                }
            }
            return b.toString();
        }
    }

    /** Every method call goes through here: Python's split, the refused methods. */
    private static final class Resolver extends ELResolver {
        private final ELResolver delegate;

        Resolver(ELResolver delegate) {
            this.delegate = delegate;
        }

        @Override
        public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
            String name = String.valueOf(method);
            if (!(base instanceof Filter) && REFUSED_METHODS.contains(name)) {
                throw new IllegalArgumentException("a task template may not call the method " + name + "()");
            }
            if (base instanceof String s && name.equals("split")) {
                Object[] p = params == null ? new Object[0] : params;
                if (p.length <= 2 && (p.length == 0 || p[0] == null || p[0] instanceof String)) {
                    String sep = p.length == 0 ? null : (String) p[0];
                    long max = p.length == 2 ? ((Number) p[1]).longValue() : -1;
                    context.setPropertyResolved(true);
                    return split(s, sep, max);
                }
            }
            if (base instanceof String s) {
                Object r = pyStringMethod(s, name, params == null ? new Object[0] : params);
                if (r != null) {
                    context.setPropertyResolved(true);
                    return r;
                }
            }
            return delegate.invoke(context, base, method, paramTypes, params);
        }

        @Override
        public Object getValue(ELContext context, Object base, Object property) {
            return delegate.getValue(context, base, property);
        }

        @Override
        public Class<?> getType(ELContext context, Object base, Object property) {
            return delegate.getType(context, base, property);
        }

        @Override
        public void setValue(ELContext context, Object base, Object property, Object value) {
            delegate.setValue(context, base, property, value);
        }

        @Override
        public boolean isReadOnly(ELContext context, Object base, Object property) {
            return delegate.isReadOnly(context, base, property);
        }

        @Override
        public java.util.Iterator<java.beans.FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
            return delegate.getFeatureDescriptors(context, base);
        }

        @Override
        public Class<?> getCommonPropertyType(ELContext context, Object base) {
            return delegate.getCommonPropertyType(context, base);
        }
    }

    /**
     * The Python str methods templates use that Java's String lacks or does differently (lower, upper,
     * strip/lstrip/rstrip with or without characters, startswith, endswith, capitalize, join); null when
     * the call is not one of them.
     */
    static Object pyStringMethod(String s, String name, Object[] p) {
        String chars = p.length == 1 && p[0] instanceof String c ? c : null;
        boolean none = p.length == 0 || (p.length == 1 && p[0] == null);
        switch (name) {
            case "lower":
                return p.length == 0 ? s.toLowerCase(java.util.Locale.ROOT) : null;
            case "upper":
                return p.length == 0 ? s.toUpperCase(java.util.Locale.ROOT) : null;
            case "capitalize":
                return p.length == 0
                        ? s.isEmpty()
                                ? s
                                : s.substring(0, 1).toUpperCase(java.util.Locale.ROOT)
                                        + s.substring(1).toLowerCase(java.util.Locale.ROOT)
                        : null;
            case "strip":
            case "lstrip":
            case "rstrip":
                if (!none && chars == null) {
                    return null;
                }
                int a = 0;
                int b = s.length();
                if (!name.equals("rstrip")) {
                    while (a < b && strippable(s.charAt(a), chars)) {
                        a++;
                    }
                }
                if (!name.equals("lstrip")) {
                    while (b > a && strippable(s.charAt(b - 1), chars)) {
                        b--;
                    }
                }
                return s.substring(a, b);
            case "startswith":
                return chars != null ? (Object) s.startsWith(chars) : null;
            case "endswith":
                return chars != null ? (Object) s.endsWith(chars) : null;
            case "join":
                if (p.length == 1 && p[0] instanceof java.util.Collection<?> items) {
                    List<String> parts = new ArrayList<>();
                    for (Object o : items) {
                        parts.add(Py.str(o));
                    }
                    return String.join(s, parts);
                }
                return null;
            default:
                return null;
        }
    }

    private static boolean strippable(char c, String chars) {
        return chars == null ? Character.isWhitespace(c) : chars.indexOf(c) >= 0;
    }

    /** Python's str.split: on whitespace runs when sep is null, else on the literal text, at most max cuts. */
    static List<String> split(String s, String sep, long max) {
        List<String> out = new ArrayList<>();
        if (sep == null) {
            int i = 0;
            int n = s.length();
            while (true) {
                while (i < n && Character.isWhitespace(s.charAt(i))) {
                    i++;
                }
                if (i >= n) {
                    return out;
                }
                if (max >= 0 && out.size() >= max) {
                    out.add(s.substring(i).stripTrailing());
                    return out;
                }
                int j = i;
                while (j < n && !Character.isWhitespace(s.charAt(j))) {
                    j++;
                }
                out.add(s.substring(i, j));
                i = j;
            }
        }
        if (sep.isEmpty()) {
            throw new IllegalArgumentException("split('') has an empty separator");
        }
        int from = 0;
        while (max < 0 || out.size() < max) {
            int at = s.indexOf(sep, from);
            if (at < 0) {
                break;
            }
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }
}
