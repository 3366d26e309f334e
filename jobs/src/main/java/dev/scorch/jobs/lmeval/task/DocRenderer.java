package dev.scorch.jobs.lmeval.task;

import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.jobs.lmeval.FewShotSampler;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

/**
 * One task's documents turned into prompts and requests exactly as lm-eval's ConfigurableTask does it.
 *
 * <p><b>Fields.</b> doc_to_text, doc_to_target, doc_to_choice (and gen_prefix) are each an integer (used
 * as is), a list (choices or targets, as is), a mapping (doc_to_choice: its values), or a string: a column
 * when the string is one of the data's column names, else a Jinja template rendered with the document. A
 * rendered doc_to_text or doc_to_target that is all digits becomes an integer when the task has
 * doc_to_choice; a rendered doc_to_target that looks like {@code [...]} is read as a Python list when it is
 * one; a rendered doc_to_choice is always read as a Python literal (e.g. {@code "{{[a, b]}}"}).
 *
 * <p><b>Context</b> (no chat template): description (a column or template; with --system_instruction in
 * front of it, joined by fewshot_delimiter unless whitespace already separates them), then each few-shot
 * example as text + target_delimiter + answer + fewshot_delimiter (the answer: choices[target] when the
 * target is an index, a list target's first item), then the document's text; with gen_prefix, the text is
 * followed by target_delimiter (unless whitespace separates them) and gen_prefix. A doc_to_text that gives
 * an integer selects a choice as the text (multiple inputs, e.g. Winogrande): each choice then makes its own
 * context.
 *
 * <p><b>Chat</b> (--apply_chat_template): the same turns as messages, system first; with
 * --fewshot_as_multiturn each example is a user and an assistant message, without it everything but the
 * system message (and a final gen_prefix assistant message) is joined into one user message as plain text
 * would join it.
 *
 * <p><b>Requests</b>: multiple_choice, one loglikelihood request per choice with continuation
 * target_delimiter + choice (with a chat template the delimiter is dropped unless gen_prefix ends without
 * whitespace), and per choice one more with an empty context when a metric is acc_mutual_info;
 * loglikelihood, (context, doc_to_target) with no delimiter added (lm-eval's tasks put it in the target);
 * loglikelihood_rolling, doc_to_target alone; generate_until, (context, generation_kwargs).
 */
public final class DocRenderer {
    /**
     * The run's prompt options (lm-eval's --system_instruction, --apply_chat_template,
     * --fewshot_as_multiturn, --num_fewshot; null numFewshot keeps the task's).
     */
    public record PromptOptions(
            String systemInstruction, boolean applyChatTemplate, boolean fewshotAsMultiturn, Integer numFewshot) {
        public static final PromptOptions DEFAULT = new PromptOptions(null, false, false, null);

        public PromptOptions {
            if (fewshotAsMultiturn && !applyChatTemplate) {
                throw new IllegalArgumentException("--fewshot_as_multiturn needs --apply_chat_template");
            }
            if (numFewshot != null && numFewshot < 0) {
                throw new IllegalArgumentException("--num_fewshot must not be negative");
            }
        }
    }

    /** One context: text, or with a chat template the messages. */
    public record Prompt(String text, LmRequest.ChatPrompt chat) {}

    private final TaskConfig cfg;
    private final Set<String> features;
    private final List<Map<String, Object>> pool;
    private final DocTemplates templates;
    private FewShotSampler<Map<String, Object>> sampler;

    /**
     * @param features    the data's column names (a prompt field naming one reads the column)
     * @param fewshotDocs the documents of {@link TaskConfig#fewshotDocsSplit()} (ignored when fewshot_config
     *                    lists samples; may be null when no few-shot example is asked for); fewshot_indices is
     *                    ignored, as lm-eval ignores it
     * @param sampler     the few-shot sampler over fewshotDocs; null: the one fewshot_config.sampler names, seeded
     *                    with lm-eval's default few-shot seed ({@link FewShotSampler#DEFAULT_SEED}),
     *                    made when first needed
     */
    public DocRenderer(
            TaskConfig cfg,
            Collection<String> features,
            List<Map<String, Object>> fewshotDocs,
            FewShotSampler<Map<String, Object>> sampler,
            DocTemplates templates) {
        this.cfg = cfg;
        this.features = Set.copyOf(features);
        List<Map<String, Object>> docs =
                cfg.fewshotDocsSplit() == null ? cfg.fewshotConfig().samples() : fewshotDocs;
        // fewshot_config.fewshot_indices is read but not used: lm-eval's task never hands it to its sampler.
        this.pool = docs == null ? List.of() : docs;
        this.sampler = sampler;
        this.templates = templates;
    }

    private String at() {
        return TaskConfig.where(cfg.task(), cfg.file());
    }

    public TaskConfig config() {
        return cfg;
    }

    // ---------------------------------------------------------------- fields

    public Object docToText(Map<String, Object> doc) {
        return docToText(doc, cfg.docToText());
    }

    Object docToText(Map<String, Object> doc, Object spec) {
        if (spec == null) {
            spec = cfg.docToText();
        }
        if (spec instanceof Integer i) {
            return i;
        }
        if (spec instanceof String s) {
            if (features.contains(s)) {
                return doc.get(s);
            }
            String text = render(s, doc, "doc_to_text");
            return Py.isDigit(text) && cfg.docToChoice() != null ? literal(text, "doc_to_text") : text;
        }
        throw new IllegalArgumentException(at() + "field 'doc_to_text' is not set");
    }

    public Object docToTarget(Map<String, Object> doc) {
        return docToTarget(doc, cfg.docToTarget());
    }

    Object docToTarget(Map<String, Object> doc, Object spec) {
        if (spec == null) {
            spec = cfg.docToTarget();
        }
        if (spec instanceof Integer || spec instanceof List<?>) {
            return spec;
        }
        if (spec instanceof String s) {
            if (features.contains(s)) {
                return doc.get(s);
            }
            String text = render(s, doc, "doc_to_target");
            if (Py.isDigit(text) && cfg.docToChoice() != null) {
                return literal(text, "doc_to_target");
            }
            if (text.length() >= 2 && text.charAt(0) == '[' && text.charAt(text.length() - 1) == ']') {
                try {
                    return Py.literalEval(text);
                } catch (IllegalArgumentException e) {
                    return text;
                }
            }
            return text;
        }
        throw new IllegalArgumentException(at() + "field 'doc_to_target' is not set");
    }

    public List<Object> docToChoice(Map<String, Object> doc) {
        return docToChoice(doc, cfg.docToChoice());
    }

    List<Object> docToChoice(Map<String, Object> doc, Object spec) {
        if (spec == null) {
            spec = cfg.docToChoice();
        }
        Object v;
        if (spec instanceof String s) {
            v = features.contains(s) ? doc.get(s) : literal(render(s, doc, "doc_to_choice"), "doc_to_choice");
        } else if (spec instanceof Map<?, ?> m) {
            v = new ArrayList<>(m.values());
        } else if (spec == null) {
            throw new IllegalArgumentException(at() + "field 'doc_to_choice' is not set");
        } else {
            v = spec;
        }
        if (!(v instanceof List<?> l)) {
            throw new IllegalArgumentException(at() + "field 'doc_to_choice' gave " + Py.typeName(v) + ", not a list");
        }
        return new ArrayList<>(l);
    }

    /** gen_prefix for a document (a column, else a template), or null. */
    String docToPrefix(Map<String, Object> doc) {
        String p = cfg.genPrefix();
        if (p == null) {
            return null;
        }
        return features.contains(p) ? Py.str(doc.get(p)) : render(p, doc, "gen_prefix");
    }

    /** lm-eval's resolve_field: a document key, else a template; null or "" stays null. */
    private String resolveField(Map<String, Object> doc, String field, String name) {
        if (field == null || field.isEmpty()) {
            return null;
        }
        return doc.containsKey(field) ? Py.str(doc.get(field)) : render(field, doc, name);
    }

    private String render(String template, Map<String, Object> doc, String field) {
        try {
            return templates.render(template, doc);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(at() + "field '" + field + "': " + e.getMessage(), e);
        }
    }

    private Object literal(String text, String field) {
        try {
            return Py.literalEval(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(at() + "field '" + field + "': " + e.getMessage(), e);
        }
    }

    // ---------------------------------------------------------------- contexts

    /** A message with the text that follows it when messages are joined as plain text. */
    private static final class Msg {
        final String role;
        final String content;
        String delimiter;

        Msg(String role, String content, String delimiter) {
            this.role = role;
            this.content = content;
            this.delimiter = delimiter;
        }

        String text() {
            return content + delimiter;
        }
    }

    /** The context as plain text (no chat template); a multiple-input task's is refused here (see contexts). */
    public String fewshotContext(Map<String, Object> doc) {
        List<Prompt> p = contexts(doc, PromptOptions.DEFAULT);
        if (p.size() != 1) {
            throw new IllegalArgumentException(at() + "doc_to_text selects a choice: one context per choice");
        }
        return p.get(0).text();
    }

    /** The document's contexts: one, or with multiple inputs one per choice. */
    public List<Prompt> contexts(Map<String, Object> doc, PromptOptions opts) {
        int n = opts.numFewshot() != null ? opts.numFewshot() : cfg.numFewshot() == null ? 0 : cfg.numFewshot();
        TaskConfig.FewshotConfig fs = cfg.fewshotConfig();
        List<Msg> messages = new ArrayList<>();
        String description = resolveField(doc, cfg.description(), "description");
        String system = maybeDelimit(opts.systemInstruction(), description, cfg.fewshotDelimiter());
        if (!system.isEmpty()) {
            messages.add(new Msg("system", system, ""));
        }
        if (n > 0) {
            if (pool.isEmpty()) {
                throw new IllegalArgumentException(
                        at() + n + " few-shot examples asked for, but there are no few-shot documents");
            }
            if (sampler == null) {
                try {
                    sampler = FewShotSampler.named(fs.sampler(), pool, FewShotSampler.DEFAULT_SEED);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException(at() + e.getMessage(), e);
                }
            }
            Map<String, Object> evalDoc = Objects.equals(fs.split(), cfg.testSplit()) ? doc : null;
            for (Map<String, Object> shot : sampler.sample(n, evalDoc)) {
                Object q = docToText(shot, fs.docToText());
                List<Object> c = fs.docToChoice() != null ? docToChoice(shot, fs.docToChoice()) : null;
                Object a = docToTarget(shot, fs.docToTarget());
                String gp = resolveField(shot, fs.genPrefix(), "fewshot_config.gen_prefix");
                if (isIndex(q)) {
                    q = c.get(((Number) q).intValue());
                    c = null;
                }
                messages.addAll(qaTurn(q, c, a, gp, fs.targetDelimiter(), fs.fewshotDelimiter()));
            }
        }
        Object q = docToText(doc);
        List<Object> c = cfg.docToChoice() != null ? docToChoice(doc) : null;
        String genPrefix = docToPrefix(doc);
        List<Prompt> out = new ArrayList<>();
        if (isIndex(q)) { // multiple inputs: each choice is a context
            if (c == null) {
                throw new IllegalArgumentException(
                        at() + "doc_to_text gave an index but the task has no doc_to_choice");
            }
            for (Object choice : c) {
                List<Msg> m = copy(messages);
                m.addAll(qaTurn(choice, null, null, genPrefix, "", "\n\n"));
                out.add(finish(m, genPrefix, opts));
            }
            return out;
        }
        messages.addAll(qaTurn(q, c, null, genPrefix, cfg.targetDelimiter(), ""));
        out.add(finish(messages, genPrefix, opts));
        return out;
    }

    private static boolean isIndex(Object o) {
        return o instanceof Integer || o instanceof Long;
    }

    private static List<Msg> copy(List<Msg> ms) {
        List<Msg> out = new ArrayList<>();
        for (Msg m : ms) {
            out.add(new Msg(m.role, m.content, m.delimiter));
        }
        return out;
    }

    private List<Msg> qaTurn(Object q, List<Object> c, Object a, String genPrefix, String tgtDelim, String fewDelim) {
        if (!(q instanceof String qs)) {
            throw new IllegalArgumentException(
                    at() + "doc_to_text gave " + Py.typeName(q) + " " + Py.repr(q) + ", not text");
        }
        boolean hasAnswer = a != null && !"".equals(a);
        boolean hasPrefix = genPrefix != null && !genPrefix.isEmpty();
        String userDelim =
                hasAnswer && !hasPrefix ? tgtDelim : hasPrefix && requiresDelimiter(qs, genPrefix) ? tgtDelim : "";
        List<Msg> out = new ArrayList<>();
        out.add(new Msg("user", qs, userDelim));
        if (hasAnswer) {
            Object answer;
            if (c != null && !c.isEmpty() && isIndex(a)) {
                int i = ((Number) a).intValue();
                if (i < 0 || i >= c.size()) {
                    throw new IllegalArgumentException(
                            at() + "a few-shot target index " + i + " is outside its " + c.size() + " choices");
                }
                answer = c.get(i);
            } else if (a instanceof List<?> l) {
                answer = l.isEmpty() ? null : l.get(0);
            } else {
                answer = a;
            }
            if (!(answer instanceof String as)) {
                throw new IllegalArgumentException(at() + "a few-shot answer is " + Py.typeName(answer) + " "
                        + Py.repr(answer) + ", not text (an index needs doc_to_choice)");
            }
            out.add(new Msg("assistant", maybeDelimit(genPrefix, as, " "), fewDelim));
        } else if (hasPrefix) {
            out.add(new Msg("assistant", genPrefix, ""));
        }
        return out;
    }

    private Prompt finish(List<Msg> messages, String genPrefix, PromptOptions opts) {
        if (!opts.applyChatTemplate()) {
            StringBuilder b = new StringBuilder();
            for (Msg m : messages) {
                b.append(m.text());
            }
            return new Prompt(b.toString(), null);
        }
        boolean addGenerationPrompt = genPrefix == null || genPrefix.isEmpty();
        List<ChatTemplate.Message> out = new ArrayList<>();
        if (opts.fewshotAsMultiturn()) {
            for (Msg m : messages) {
                out.add(new ChatTemplate.Message(m.role, m.content));
            }
        } else {
            Msg system = messages.get(0).role.equals("system") ? messages.get(0) : null;
            List<Msg> rest = new ArrayList<>(messages.subList(system == null ? 0 : 1, messages.size()));
            if (system != null) {
                out.add(new ChatTemplate.Message("system", system.content));
            }
            Msg last = rest.get(rest.size() - 1);
            List<Msg> user = last.role.equals("assistant") ? rest.subList(0, rest.size() - 1) : rest;
            user.get(user.size() - 1).delimiter = "";
            StringBuilder b = new StringBuilder();
            for (Msg m : user) {
                b.append(m.text());
            }
            out.add(new ChatTemplate.Message("user", b.toString()));
            if (last.role.equals("assistant")) {
                out.add(new ChatTemplate.Message("assistant", last.content));
            }
        }
        return new Prompt(null, new LmRequest.ChatPrompt(List.copyOf(out), addGenerationPrompt));
    }

    /** lm-eval's maybe_delimit: prefix + delimiter + suffix unless either is empty or whitespace meets them. */
    static String maybeDelimit(String prefix, String suffix, String delimiter) {
        if (prefix == null || prefix.isEmpty()) {
            return suffix == null ? "" : suffix;
        }
        if (suffix == null || suffix.isEmpty()) {
            return prefix;
        }
        return isSpace(prefix.charAt(prefix.length() - 1)) || isSpace(suffix.charAt(0))
                ? prefix + suffix
                : prefix + delimiter + suffix;
    }

    static boolean requiresDelimiter(String prefix, String suffix) {
        if (prefix.isEmpty()) {
            return false;
        }
        return !(isSpace(prefix.charAt(prefix.length() - 1)) || isSpace(suffix.charAt(0)));
    }

    /** Python's str.isspace for one character. */
    static boolean isSpace(char c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c) || (c >= 0x1c && c <= 0x1f) || c == 0x85;
    }

    // ---------------------------------------------------------------- requests

    /** The document's requests (lm-eval's construct_requests), docId its index in the eval split. */
    public List<LmRequest> requests(int docId, Map<String, Object> doc, PromptOptions opts) {
        String task = cfg.task();
        int repeats = cfg.repeats();
        List<LmRequest> out = new ArrayList<>();
        switch (cfg.outputType()) {
            case LOGLIKELIHOOD_ROLLING ->
                out.add(new LmRequest(
                        task,
                        docId,
                        0,
                        OutputType.LOGLIKELIHOOD_ROLLING,
                        null,
                        null,
                        text(docToTarget(doc), "doc_to_target"),
                        null,
                        repeats));
            case LOGLIKELIHOOD -> {
                Prompt p = single(doc, opts);
                out.add(new LmRequest(
                        task,
                        docId,
                        0,
                        OutputType.LOGLIKELIHOOD,
                        p.text(),
                        p.chat(),
                        text(docToTarget(doc), "doc_to_target"),
                        null,
                        repeats));
            }
            case GENERATE_UNTIL -> {
                Prompt p = single(doc, opts);
                out.add(new LmRequest(
                        task,
                        docId,
                        0,
                        OutputType.GENERATE_UNTIL,
                        p.text(),
                        p.chat(),
                        null,
                        cfg.generationKwargs(),
                        repeats));
            }
            case MULTIPLE_CHOICE -> {
                List<Prompt> contexts = contexts(doc, opts);
                List<Object> choices = docToChoice(doc);
                String delim = cfg.targetDelimiter();
                if (opts.applyChatTemplate()) {
                    String gp = cfg.genPrefix();
                    delim = gp != null && !gp.isEmpty() && !isSpace(gp.charAt(gp.length() - 1)) ? delim : "";
                }
                int i = 0;
                if (contexts.size() > 1 || isIndex(docToText(doc))) {
                    String cont = delim + Py.str(docToTarget(doc));
                    for (Prompt p : contexts) {
                        out.add(new LmRequest(
                                task, docId, i++, OutputType.LOGLIKELIHOOD, p.text(), p.chat(), cont, null, repeats));
                    }
                } else {
                    Prompt p = contexts.get(0);
                    for (Object choice : choices) {
                        out.add(new LmRequest(
                                task,
                                docId,
                                i++,
                                OutputType.LOGLIKELIHOOD,
                                p.text(),
                                p.chat(),
                                delim + Py.str(choice),
                                null,
                                repeats));
                    }
                }
                if (cfg.metricList().stream().anyMatch(m -> m.metric().equals("acc_mutual_info"))) {
                    for (Object choice : choices) {
                        out.add(new LmRequest(
                                task,
                                docId,
                                i++,
                                OutputType.LOGLIKELIHOOD,
                                "",
                                null,
                                delim + Py.str(choice),
                                null,
                                repeats));
                    }
                }
            }
        }
        return out;
    }

    private Prompt single(Map<String, Object> doc, PromptOptions opts) {
        List<Prompt> p = contexts(doc, opts);
        if (p.size() != 1) {
            throw new IllegalArgumentException(
                    at() + "doc_to_text selects a choice, which only multiple_choice supports");
        }
        return p.get(0);
    }

    private String text(Object v, String field) {
        if (v instanceof String s) {
            return s;
        }
        throw new IllegalArgumentException(
                at() + "field '" + field + "' gave " + Py.typeName(v) + " " + Py.repr(v) + ", not text");
    }
}
