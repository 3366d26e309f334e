package dev.scorch.engine.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.el.JinjavaProcessors;
import com.hubspot.jinjava.interpret.Context;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.filter.AdvancedFilter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * A model's Jinja chat template (tokenizer_config.json {@code chat_template}), rendered with Jinjava the way
 * transformers' {@code apply_chat_template} renders it with Jinja2: trim_blocks and lstrip_blocks on, the
 * variables {@code messages}, {@code add_generation_prompt}, {@code bos_token}, {@code eos_token}, the
 * functions {@code raise_exception(msg)} and {@code strftime_now(format)}, and a {@code tojson} filter that
 * writes like Python's {@code json.dumps} (", " and ": " separators, non-ASCII kept, {@code indent=N}), as
 * transformers' own tojson does.
 *
 * <p>A template comes from a checkpoint and is untrusted: each render runs in a sandbox ({@link RenderGuard}
 * on a worker thread, {@link TemplateSandbox} for calls) held to {@link Limits}, and whatever goes wrong,
 * a stack overflow, a runaway loop, a string or list grown past its limit, surfaces as a
 * {@link ChatTemplateException} for that render. A template cannot read anything (include, import, from and
 * extends are refused), and the text it is given is never itself rendered (Jinjava's nested interpretation
 * is off, as Jinja2 has none).
 *
 * <p>Thread-safe: rendering keeps no state between calls.
 */
public final class ChatTemplate {
    /** One chat message; {@link #render(List, boolean)} also takes plain maps for tool calls and the like. */
    public record Message(String role, String content) {
        public Message {
            Objects.requireNonNull(role, "role");
        }

        Map<String, Object> toMap() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("role", role);
            m.put("content", content);
            return m;
        }
    }

    /**
     * What one render may use: CPU time, bytes allocated (garbage included: the bound on how much memory it
     * can hold), characters in any string it makes (the output included), items in any list or map, and
     * how deep brackets may nest in an expression (Jinjava's parser takes time superlinear in that and
     * cannot be stopped). {@link #DEFAULT} leaves real templates far from every limit: DeepSeek-V3's renders
     * a chat in well under a millisecond, allocating about 150 KB (and 450 MB for a chat of 100 system
     * messages of 10,000 characters, which it joins one by one); a cold JVM's first render takes about a
     * second.
     */
    record Limits(long timeNanos, long maxAllocatedBytes, long maxStringChars, int maxItems, int maxBracketDepth) {
        static final Limits DEFAULT = new Limits(
                TimeUnit.SECONDS.toNanos(5),
                Math.min(1L << 30, Runtime.getRuntime().maxMemory() / 4),
                64L << 20,
                1_000_000,
                100);

        String timeDescription() {
            return timeNanos % 1_000_000_000L == 0
                    ? timeNanos / 1_000_000_000L + " s"
                    : TimeUnit.NANOSECONDS.toMillis(timeNanos) + " ms";
        }
    }

    /** Filters that parse text given at render time: a template (render) or YAML/JSON documents. */
    private static final Set<String> REFUSED_FILTERS = Set.of("render", "fromyaml", "fromjson");

    private final String template;
    private final String bosToken;
    private final String eosToken;
    private final Limits limits;
    private final Jinjava jinjava;
    private final String refused; // why every render fails without trying, or null

    /** @param bosToken value of {@code bos_token} in the template (null renders as empty), likewise eosToken */
    public ChatTemplate(String template, String bosToken, String eosToken) {
        this(template, bosToken, eosToken, Limits.DEFAULT);
    }

    ChatTemplate(String template, String bosToken, String eosToken, Limits limits) {
        this.template = Objects.requireNonNull(template, "template");
        this.bosToken = bosToken;
        this.eosToken = eosToken;
        this.limits = limits;
        int depth = bracketDepth(template);
        refused = depth > limits.maxBracketDepth()
                ? "chat template nests brackets " + depth + " deep, over the limit of " + limits.maxBracketDepth()
                : null;
        JinjavaConfig config = JinjavaConfig.newBuilder()
                .withTrimBlocks(true)
                .withLstripBlocks(true)
                .withNestedInterpretationEnabled(false)
                .withMaxOutputSize(limits.maxStringChars())
                .withMaxStringLength(limits.maxStringChars())
                .withMaxListSize(limits.maxItems())
                .withMaxMapSize(limits.maxItems())
                .withRangeLimit(limits.maxItems())
                .withDisabled(Map.of(Context.Library.FILTER, REFUSED_FILTERS))
                .withElResolver(new TemplateSandbox(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY, limits))
                .withProcessors(JinjavaProcessors.newBuilder()
                        .withNodePreProcessor((node, interpreter) -> RenderGuard.check())
                        .build())
                .build();
        jinjava = new Jinjava(config);
        // include, import, from and extends read through the locator. Refused when they run, not when parsed:
        // Jinja2 in transformers (no loader) fails the same way, so a template that has one in a branch it never
        // takes renders as it does there.
        jinjava.setResourceLocator((name, encoding, interpreter) -> {
            throw RenderGuard.refuse(
                    "chat template may not read other templates or files (it asked for " + quote(name) + ")");
        });
        jinjava.getGlobalContext()
                .registerFunction(new ELFunctionDefinition(
                        "", "raise_exception", ChatTemplate.class, "raiseException", String.class));
        jinjava.getGlobalContext()
                .registerFunction(
                        new ELFunctionDefinition("", "strftime_now", ChatTemplate.class, "strftimeNow", String.class));
        jinjava.getGlobalContext().registerFilter(new PythonToJson());
    }

    /** The template source. */
    public String template() {
        return template;
    }

    /** Renders a conversation of (role, content) messages. */
    public String render(List<Message> messages, boolean addGenerationPrompt) {
        List<Map<String, Object>> maps = new ArrayList<>(messages.size());
        for (Message m : messages) {
            maps.add(m.toMap());
        }
        return renderMaps(maps, addGenerationPrompt, Map.of());
    }

    /**
     * Renders messages given as maps (role, content, and whatever else the template reads, e.g. tool_calls);
     * {@code extra} adds variables such as {@code tools}. Throws {@link ChatTemplateException} when the
     * template calls raise_exception or cannot be rendered.
     */
    public String renderMaps(
            List<? extends Map<String, ?>> messages, boolean addGenerationPrompt, Map<String, ?> extra) {
        Map<String, Object> vars = new HashMap<>(extra);
        vars.put("messages", messages);
        vars.put("add_generation_prompt", addGenerationPrompt);
        vars.putIfAbsent("bos_token", bosToken == null ? "" : bosToken);
        vars.putIfAbsent("eos_token", eosToken == null ? "" : eosToken);
        if (refused != null) {
            throw new ChatTemplateException(refused);
        }
        return RenderGuard.run(() -> renderNow(vars), limits);
    }

    /** One render on the calling (worker) thread; a fatal template error becomes the exception. */
    private String renderNow(Map<String, Object> vars) {
        RenderResult result = jinjava.renderForResult(template, vars);
        for (TemplateError e : result.getErrors()) {
            if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
                if (causedBy(e.getException(), StackOverflowError.class)) { // caught inside Jinjava (a macro call)
                    throw new ChatTemplateException(RenderGuard.STACK_OVERFLOW);
                }
                if (e.getReason() == TemplateError.ErrorReason.DISABLED) {
                    throw new ChatTemplateException(
                            "chat template may not use " + disabledName(e)
                                    + ": a chat template can neither read other templates or files nor render text as a template");
                }
                String raised = raisedMessage(e);
                throw new ChatTemplateException(
                        raised != null
                                ? "chat template raised: " + shorten(raised)
                                : "chat template failed at line " + e.getLineno() + ": " + shorten(detail(e)));
            }
        }
        return result.getOutput();
    }

    private static boolean causedBy(Throwable t, Class<? extends Throwable> type) {
        for (int depth = 0; t != null && depth < 100; t = t.getCause(), depth++) {
            if (type.isInstance(t)) {
                return true;
            }
        }
        return false;
    }

    /** Jinjava's message, with the root cause's where the message is only "Error rendering tag" or the like. */
    private static String detail(TemplateError e) {
        String m = String.valueOf(e.getMessage());
        Throwable root = e.getException();
        while (root != null && root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        // Parse errors (ELException) repeat the message; limits (CollectionTooBigException...) add to it.
        String cause = root == null || root instanceof jinjava.javax.el.ELException ? null : root.getMessage();
        return cause == null || m.contains(cause) ? m : m + " (" + cause + ")";
    }

    /** The tag or filter a DISABLED error names ("'include' is disabled in this context"). */
    private static String disabledName(TemplateError e) {
        String m = String.valueOf(e.getMessage());
        int a = m.indexOf('\'');
        int b = a < 0 ? -1 : m.indexOf('\'', a + 1);
        String name = b < 0 ? m : m.substring(a + 1, b);
        return e.getItem() == TemplateError.ErrorItem.TAG ? "{% " + name + " %}" : "the " + name + " filter";
    }

    /** Jinjava's messages quote the failing expression, which may be huge; a row's error stays readable. */
    private static String shorten(String s) {
        if (s == null) {
            return null;
        }
        s = s.strip().replace('\n', ' ');
        return s.length() <= 500 ? s : s.substring(0, 500) + "... (" + s.length() + " characters)";
    }

    private static String quote(String s) {
        return s == null ? "null" : "'" + shorten(s) + "'";
    }

    /**
     * The deepest nesting of ( [ { inside the template's {{ }} and {% %} blocks, string literals and
     * comments skipped. An over-estimate where the template is malformed, which only matters past the limit.
     */
    static int bracketDepth(String t) {
        int max = 0;
        int n = t.length();
        int i = 0;
        while (i + 1 < n) {
            int open = t.indexOf('{', i);
            if (open < 0 || open + 1 >= n) {
                break;
            }
            char kind = t.charAt(open + 1);
            if (kind == '#') {
                int end = t.indexOf("#}", open + 2);
                i = end < 0 ? n : end + 2;
                continue;
            }
            if (kind != '{' && kind != '%') {
                i = open + 1;
                continue;
            }
            int depth = 0;
            char quote = 0;
            int j = open + 2;
            for (; j < n; j++) {
                char c = t.charAt(j);
                if (quote != 0) {
                    if (c == '\\') {
                        j++;
                    } else if (c == quote) {
                        quote = 0;
                    }
                } else if (c == '\'' || c == '"') {
                    quote = c;
                } else if (c == '(' || c == '[' || c == '{') {
                    max = Math.max(max, ++depth);
                } else if (depth == 0 && j + 1 < n && t.charAt(j + 1) == '}' && c == (kind == '{' ? '}' : '%')) {
                    break;
                } else if (c == ')' || c == ']' || c == '}') {
                    depth = Math.max(depth - 1, 0);
                }
            }
            i = j + 2;
        }
        return max;
    }

    /** The message of a raise_exception call behind a Jinjava error, or null. */
    private static String raisedMessage(TemplateError e) {
        for (Throwable t = e.getException(); t != null; t = t.getCause()) {
            if (t instanceof ChatTemplateException) {
                return t.getMessage();
            }
        }
        String msg = e.getMessage();
        int at = msg == null ? -1 : msg.indexOf(RAISED);
        return at < 0 ? null : msg.substring(at + RAISED.length());
    }

    private static final String RAISED = "raise_exception: ";

    /** Template function raise_exception(message): aborts rendering with that message. */
    public static String raiseException(String message) {
        throw new ChatTemplateException(RAISED + message);
    }

    /** Template function strftime_now(format): the local time, Python strftime codes %Y %m %d %H %M %S %b %B. */
    public static String strftimeNow(String format) {
        LocalDateTime now = LocalDateTime.now();
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < format.length(); i++) {
            char c = format.charAt(i);
            if (c != '%' || i + 1 >= format.length()) {
                sb.append(c);
                continue;
            }
            char f = format.charAt(++i);
            switch (f) {
                case 'Y' -> sb.append(now.getYear());
                case 'm' -> sb.append(String.format("%02d", now.getMonthValue()));
                case 'd' -> sb.append(String.format("%02d", now.getDayOfMonth()));
                case 'H' -> sb.append(String.format("%02d", now.getHour()));
                case 'M' -> sb.append(String.format("%02d", now.getMinute()));
                case 'S' -> sb.append(String.format("%02d", now.getSecond()));
                case 'b' -> sb.append(now.format(DateTimeFormatter.ofPattern("MMM", java.util.Locale.ENGLISH)));
                case 'B' -> sb.append(now.format(DateTimeFormatter.ofPattern("MMMM", java.util.Locale.ENGLISH)));
                case '%' -> sb.append('%');
                default -> sb.append('%').append(f);
            }
        }
        return sb.toString();
    }

    /** The template could not be rendered, or it called raise_exception, or it went past a limit. */
    public static final class ChatTemplateException extends RuntimeException {
        public ChatTemplateException(String message) {
            super(message);
        }

        public ChatTemplateException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** tojson as transformers defines it: json.dumps(x, ensure_ascii=False, indent=indent). */
    static final class PythonToJson implements AdvancedFilter {
        @Override
        public String getName() {
            return "tojson";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object indent = kwargs.get("indent");
            if (indent == null && args.length > 0) {
                indent = args[0];
            }
            int n = indent instanceof Number ? ((Number) indent).intValue() : -1;
            StringBuilder sb = new StringBuilder();
            write(var, n, 0, sb);
            return sb.toString();
        }

        private static void write(Object v, int indent, int depth, StringBuilder sb) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof Boolean) {
                sb.append(((Boolean) v) ? "true" : "false");
            } else if (v instanceof Double || v instanceof Float) {
                double d = ((Number) v).doubleValue();
                sb.append(d == Math.rint(d) && Math.abs(d) < 1e16 ? String.format("%.1f", d) : Double.toString(d));
            } else if (v instanceof Number) {
                sb.append(v);
            } else if (v instanceof Map) {
                Map<?, ?> m = (Map<?, ?>) v;
                sb.append('{');
                int i = 0;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    sb.append(i++ == 0 ? "" : ",");
                    newline(indent, depth + 1, sb, i == 1);
                    string(String.valueOf(e.getKey()), sb);
                    sb.append(": ");
                    write(e.getValue(), indent, depth + 1, sb);
                }
                if (!m.isEmpty() && indent >= 0) {
                    newline(indent, depth, sb, false);
                }
                sb.append('}');
            } else if (v instanceof Iterable || v instanceof Object[]) {
                Iterable<?> it = v instanceof Object[] ? java.util.Arrays.asList((Object[]) v) : (Iterable<?>) v;
                sb.append('[');
                int i = 0;
                for (Object o : it) {
                    sb.append(i++ == 0 ? "" : ",");
                    newline(indent, depth + 1, sb, i == 1);
                    write(o, indent, depth + 1, sb);
                }
                if (i > 0 && indent >= 0) {
                    newline(indent, depth, sb, false);
                }
                sb.append(']');
            } else {
                string(v.toString(), sb);
            }
        }

        /** Separator before an item: " " (compact, after a comma) or a newline and indentation. */
        private static void newline(int indent, int depth, StringBuilder sb, boolean first) {
            if (indent >= 0) {
                sb.append('\n').append(" ".repeat(indent * depth));
            } else if (!first) {
                sb.append(' ');
            }
        }

        private static void string(String s, StringBuilder sb) {
            sb.append('"');
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    case '\b' -> sb.append("\\b");
                    case '\f' -> sb.append("\\f");
                    default -> {
                        if (c < 0x20) {
                            sb.append(String.format("\\u%04x", (int) c));
                        } else {
                            sb.append(c);
                        }
                    }
                }
            }
            sb.append('"');
        }
    }
}
