package dev.scorch.jobs.lmeval;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.scorch.engine.checkpoint.ModelFiles;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * --apply_chat_template: the model's chat template, chosen and applied as lm-eval's Hugging Face backend does
 * (HFLM.chat_template and HFLM.apply_chat_template over transformers' tokenizer.apply_chat_template).
 *
 * <p>Choice: the tokenizer's templates as transformers loads them: chat_template.jinja when the folder has one (it
 * takes priority), else tokenizer_config.json's chat_template, a string or a list of {name, template}. A single
 * template is used whatever name is given (lm-eval only warns); among several, the one named, else "default". A
 * model without one is refused.
 *
 * <p>Application: add_generation_prompt unless the messages end in an assistant message (gen_prefix), which is then
 * continued (continue_final_message: the rendering cut after that message's text, as transformers cuts it). When the
 * template fails (raise_exception, e.g. on a system role it does not take), it is applied once more without the system
 * messages, as lm-eval does.
 *
 * @param source the template's text (recorded in results as chat_template)
 */
public record ChatFormat(String source, ChatTemplate template) {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The template --apply_chat_template [NAME] picks from the model folder; name null or empty: the default. */
    public static ChatFormat select(Path modelDir, Tokenizer tok, String name) {
        Map<String, String> templates = templates(modelDir);
        String source;
        if (templates.isEmpty()) {
            throw new IllegalArgumentException("--apply_chat_template: the model folder " + modelDir
                    + " has no chat template (neither tokenizer_config.json's chat_template nor chat_template.jinja);"
                    + " run without --apply_chat_template");
        } else if (templates.size() == 1 && templates.containsKey("")) {
            source = templates.get("");
        } else {
            String wanted = name == null || name.isEmpty() ? "default" : name;
            source = templates.get(wanted);
            if (source == null) {
                throw new IllegalArgumentException("--apply_chat_template " + (name == null ? "" : name)
                        + ": the model folder " + modelDir + " has no chat template named '" + wanted
                        + "'; its templates are " + new TreeSet<>(templates.keySet()));
            }
        }
        return new ChatFormat(source, new ChatTemplate(source, tokenText(tok, tok.bosTokenId()), eosText(tok)));
    }

    /** The folder's templates by name; one unnamed ("") when there is a single template. */
    static Map<String, String> templates(Path modelDir) {
        Map<String, String> out = new LinkedHashMap<>();
        Path jinja = modelDir.resolve("chat_template.jinja");
        Path config = modelDir.resolve("tokenizer_config.json");
        ModelFiles.requireInside(modelDir, jinja); // never read (nor quote) a file a link brings in from elsewhere
        ModelFiles.requireInside(modelDir, config);
        try {
            if (Files.isRegularFile(jinja)) {
                out.put("", Files.readString(jinja, StandardCharsets.UTF_8));
                return out;
            }
            if (!Files.isRegularFile(config)) {
                return out;
            }
            JsonNode t = JSON.readTree(config.toFile()).get("chat_template");
            if (t == null || t.isNull()) {
                return out;
            }
            if (t.isTextual()) {
                out.put("", t.asText());
                return out;
            }
            if (t.isArray()) {
                for (JsonNode e : t) {
                    if (e.path("name").isTextual() && e.path("template").isTextual()) {
                        out.put(e.get("name").asText(), e.get("template").asText());
                        continue;
                    }
                    throw new IllegalArgumentException(
                            config + ": chat_template lists an entry without a name and a template: " + e);
                }
                return out;
            }
            throw new IllegalArgumentException(config + ": chat_template is neither a string nor a list");
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read the chat template of " + modelDir + ": " + e, e);
        }
    }

    private static String tokenText(Tokenizer tok, Integer id) {
        return id == null ? null : tok.decode(new int[] {id}, false);
    }

    private static String eosText(Tokenizer tok) {
        return tok.eosTokenIds().isEmpty()
                ? null
                : tokenText(tok, tok.eosTokenIds().get(0));
    }

    /** The prompt text for these messages (lm-eval's apply_chat_template). */
    public String apply(List<ChatTemplate.Message> messages, boolean addGenerationPrompt) {
        try {
            return render(messages, addGenerationPrompt);
        } catch (ChatTemplate.ChatTemplateException e) {
            List<ChatTemplate.Message> rest = new ArrayList<>();
            for (ChatTemplate.Message m : messages) {
                if (!m.role().equals("system")) {
                    rest.add(m);
                }
            }
            return render(rest, addGenerationPrompt);
        }
    }

    private String render(List<ChatTemplate.Message> messages, boolean addGenerationPrompt) {
        String out = template.render(messages, addGenerationPrompt);
        if (addGenerationPrompt) {
            return out;
        }
        String last = messages.get(messages.size() - 1).content();
        String stripped = PyText.strip(last);
        int at = out.lastIndexOf(stripped);
        if (at < 0) {
            throw new IllegalArgumentException("the chat template drops part of the final assistant message "
                    + PyJson.dumps(last, null) + " (gen_prefix), which must be continued");
        }
        int end = at + PyText.lstrip(last).length();
        if (end <= out.length() && out.substring(at, end).equals(last)) {
            return out.substring(0, end);
        }
        return out.substring(0, at + stripped.length()); // the template trimmed the message's trailing space
    }
}
