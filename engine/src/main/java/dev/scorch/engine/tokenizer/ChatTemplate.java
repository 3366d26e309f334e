package dev.scorch.engine.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
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

/**
 * A model's Jinja chat template (tokenizer_config.json {@code chat_template}), rendered with Jinjava the way
 * transformers' {@code apply_chat_template} renders it with Jinja2: trim_blocks and lstrip_blocks on, the
 * variables {@code messages}, {@code add_generation_prompt}, {@code bos_token}, {@code eos_token}, the
 * functions {@code raise_exception(msg)} and {@code strftime_now(format)}, and a {@code tojson} filter that
 * writes like Python's {@code json.dumps} (", " and ": " separators, non-ASCII kept, {@code indent=N}), as
 * transformers' own tojson does.
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

  private final String template;
  private final String bosToken;
  private final String eosToken;
  private final Jinjava jinjava;

  /** @param bosToken value of {@code bos_token} in the template (null renders as empty), likewise eosToken */
  public ChatTemplate(String template, String bosToken, String eosToken) {
    this.template = Objects.requireNonNull(template, "template");
    this.bosToken = bosToken;
    this.eosToken = eosToken;
    JinjavaConfig config =
        JinjavaConfig.newBuilder()
            .withTrimBlocks(true)
            .withLstripBlocks(true)
            .withMaxOutputSize(64L << 20)
            .build();
    jinjava = new Jinjava(config);
    jinjava
        .getGlobalContext()
        .registerFunction(
            new ELFunctionDefinition("", "raise_exception", ChatTemplate.class, "raiseException", String.class));
    jinjava
        .getGlobalContext()
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
    RenderResult result = jinjava.renderForResult(template, vars);
    for (TemplateError e : result.getErrors()) {
      if (e.getSeverity() == TemplateError.ErrorType.FATAL) {
        String raised = raisedMessage(e);
        throw new ChatTemplateException(
            raised != null
                ? "chat template raised: " + raised
                : "chat template failed at line " + e.getLineno() + ": " + e.getMessage());
      }
    }
    return result.getOutput();
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

  /** The template could not be rendered, or it called raise_exception. */
  public static final class ChatTemplateException extends RuntimeException {
    public ChatTemplateException(String message) {
      super(message);
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
