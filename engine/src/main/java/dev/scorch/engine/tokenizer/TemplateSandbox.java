package dev.scorch.engine.tokenizer;

import com.hubspot.jinjava.lib.filter.Filter;
import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * The resolver every property access, method call and filter call of a chat template goes through: it
 * gives {@link RenderGuard} a chance to stop the render at each one, and refuses the few calls whose cost
 * one step could make unbounded, before they run:
 *
 * <ul>
 *   <li>Java methods that run a java.util.regex pattern the template chose (no time bound: {@code (a|aa)+$}
 *       backtracks for ever) or allocate as much as an argument asks ({@code 'a'.repeat(10**9)});
 *       {@code split}, which templates use as Python's str.split, splits on the literal text as Python
 *       does instead;
 *   <li>{@code replace} on a string whose result would pass the string limit;
 *   <li>the filters whose size argument sets the output size: center, indent, batch, slice, and format's
 *       widths.
 * </ul>
 *
 * Whatever a call returns is held to the string and collection limits too. Jinjava's own limits (output
 * size, list and map size, range) cover the operators and the other filters.
 */
final class TemplateSandbox extends ELResolver {
    /** Methods a template may not call, on any object (see the class comment). */
    static final Set<String> REFUSED_METHODS = Set.of(
            "matches", "replaceAll", "replaceFirst", "splitWithDelimiters", "repeat", "indent", "format", "formatted");

    private final ELResolver delegate;
    private final ChatTemplate.Limits limits;

    TemplateSandbox(ELResolver delegate, ChatTemplate.Limits limits) {
        this.delegate = delegate;
        this.limits = limits;
    }

    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        RenderGuard.check();
        return delegate.getValue(context, base, property);
    }

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        RenderGuard.check();
        String name = String.valueOf(method);
        if (base instanceof Filter f && name.equals("filter")) { // (value, interpreter, args, kwargs)
            Object value = params != null && params.length > 0 ? params[0] : null;
            Object[] args = params != null && params.length > 2 && params[2] instanceof Object[] a ? a : new Object[0];
            Map<?, ?> kwargs = params != null && params.length > 3 && params[3] instanceof Map<?, ?> m ? m : Map.of();
            checkFilter(f.getName(), value, args, kwargs);
        } else if (REFUSED_METHODS.contains(name)) {
            throw refuse("chat template may not call the method " + name + "()");
        } else if (base instanceof String s && params != null) {
            if (name.equals("split") && (params.length == 1 || params.length == 2) && params[0] instanceof String sep) {
                long maxSplit = params.length == 2 ? number(params[1]) : -1;
                context.setPropertyResolved(true);
                return held(split(s, sep, maxSplit));
            }
            if (name.equals("replace")
                    && params.length == 2
                    && params[0] instanceof CharSequence from
                    && params[1] instanceof CharSequence to) {
                checkReplace(s, from.toString(), to.length());
            }
        }
        return held(delegate.invoke(context, base, method, paramTypes, params));
    }

    /**
     * Python's str.split(sep, maxsplit) on the literal text (Java's String.split takes a regex): at most
     * {@code maxSplit} cuts when it is not negative, trailing empty parts kept.
     */
    static String[] split(String s, String sep, long maxSplit) {
        if (sep.isEmpty()) {
            throw refuse("chat template called split('') (an empty separator)");
        }
        List<String> parts = new ArrayList<>();
        int from = 0;
        for (int at = s.indexOf(sep); at >= 0 && (maxSplit < 0 || parts.size() < maxSplit); at = s.indexOf(sep, from)) {
            parts.add(s.substring(from, at));
            from = at + sep.length();
        }
        parts.add(s.substring(from));
        return parts.toArray(new String[0]);
    }

    private void checkReplace(String s, String from, int toLength) {
        if (from.isEmpty() || toLength <= from.length()) {
            // An empty target puts the replacement between every two characters.
            long size = from.isEmpty() ? s.length() + (long) (s.length() + 1) * toLength : s.length();
            checkSize(size, "replace()");
            return;
        }
        long count = 0;
        for (int at = s.indexOf(from); at >= 0; at = s.indexOf(from, at + from.length())) {
            count++;
        }
        checkSize(s.length() + count * (toLength - from.length()), "replace()");
    }

    private void checkFilter(String filter, Object value, Object[] args, Map<?, ?> kwargs) {
        switch (filter) {
            case "center" -> checkSize(number(arg(args, kwargs, 0, "width")), "center()");
            case "indent" -> {
                long lines = value == null
                        ? 1
                        : value.toString().chars().filter(c -> c == '\n').count() + 1;
                long width = number(arg(args, kwargs, 0, "width"));
                checkSize(String.valueOf(value).length() + lines * Math.max(width, 0), "indent()");
            }
            case "batch", "slice" -> {
                long n = number(arg(args, kwargs, 0, filter.equals("batch") ? "linecount" : "slices"));
                if (n > limits.maxItems()) {
                    throw refuse("chat template called " + filter + "(" + n + "), over the limit of "
                            + limits.maxItems() + " items");
                }
            }
            case "format" -> checkFormatWidths(String.valueOf(value));
            default -> {}
        }
    }

    /** Refuses %N / %.N specs (java.util.Formatter syntax) wider than the string limit. */
    private void checkFormatWidths(String format) {
        int n = format.length();
        for (int i = format.indexOf('%'); i >= 0; ) {
            int j = i + 1;
            long v = 0;
            for (; j < n; j++) {
                char c = format.charAt(j);
                if (c >= '0' && c <= '9') {
                    v = Math.min(v * 10 + (c - '0'), 1L << 40);
                } else if ("-#+ 0,(<$.".indexOf(c) >= 0) {
                    checkSize(v, "format()");
                    v = 0;
                } else {
                    break;
                }
            }
            checkSize(v, "format()");
            i = format.indexOf('%', j);
        }
    }

    private void checkSize(long chars, String what) {
        if (chars > limits.maxStringChars()) {
            throw refuse("chat template called " + what + " for " + chars + " characters, over the limit of "
                    + limits.maxStringChars());
        }
    }

    /** A call's result, held to the string and collection limits. */
    private Object held(Object result) {
        long size = result instanceof CharSequence cs ? cs.length() : -1;
        if (size > limits.maxStringChars()) {
            throw refuse("chat template made a string of " + size + " characters, over the limit of "
                    + limits.maxStringChars());
        }
        size = result instanceof Collection<?> c
                ? c.size()
                : result instanceof Map<?, ?> m ? m.size() : result instanceof Object[] a ? a.length : -1;
        if (size > limits.maxItems()) {
            throw refuse(
                    "chat template made a collection of " + size + " items, over the limit of " + limits.maxItems());
        }
        return result;
    }

    private static Object arg(Object[] args, Map<?, ?> kwargs, int i, String name) {
        if (kwargs != null && kwargs.containsKey(name)) {
            return kwargs.get(name);
        }
        return args != null && args.length > i ? args[i] : null;
    }

    private static long number(Object o) {
        if (o instanceof Number n) {
            return n.longValue();
        }
        if (o != null) {
            try {
                return (long) Double.parseDouble(o.toString().trim());
            } catch (NumberFormatException e) {
                return 0; // not a number: the filter reports it
            }
        }
        return 0;
    }

    private static Error refuse(String why) {
        return RenderGuard.refuse(why);
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return delegate.getType(context, base, property);
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {
        RenderGuard.check();
        delegate.setValue(context, base, property, value);
    }

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return delegate.isReadOnly(context, base, property);
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return delegate.getFeatureDescriptors(context, base);
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return delegate.getCommonPropertyType(context, base);
    }
}
