package dev.scorch.jobs.lmeval;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.tokenizer.ChatTemplate.Message;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.DemoModel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --apply_chat_template's choice of template and its application (lm-eval's HFLM.chat_template and
 * apply_chat_template over transformers): the expected prompts are written out by hand for tiny templates.
 */
class ChatFormatTest {
    static final ObjectMapper OM = new ObjectMapper();
    static Tokenizer tok; // the demo tokenizer: BOS <|bos|>, EOS <|eos|>

    @TempDir
    Path dir;

    @BeforeAll
    static void load() {
        tok = Tokenizers.load(DemoModel.resolve("demo")).orElseThrow();
    }

    /** A folder whose tokenizer_config.json has this chat_template value (a string, a list, or absent). */
    Path folder(Object chatTemplate) throws Exception {
        ObjectNode cfg = OM.createObjectNode().put("bos_token", "<|bos|>").put("eos_token", "<|eos|>");
        if (chatTemplate != null) {
            cfg.set("chat_template", OM.valueToTree(chatTemplate));
        }
        Files.writeString(dir.resolve("tokenizer_config.json"), OM.writeValueAsString(cfg));
        return dir;
    }

    static final String PLAIN =
            "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{{ eos_token }}"
                    + "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}";

    @Test
    void addsTheGenerationPrompt() throws Exception {
        ChatFormat f = ChatFormat.select(folder(PLAIN), tok, "");
        assertEquals(PLAIN, f.source());
        String out = f.apply(List.of(new Message("system", "Be brief."), new Message("user", "Q: 2+2?\nA:")), true);
        assertEquals("<|bos|>[system]Be brief.<|eos|>[user]Q: 2+2?\nA:<|eos|>[assistant]", out);
    }

    @Test
    void aFinalAssistantMessageIsContinuedNotClosed() throws Exception {
        ChatFormat f = ChatFormat.select(folder(PLAIN), tok, null);
        // continue_final_message: cut right after the gen_prefix, before the template's end-of-turn text
        assertEquals(
                "<|bos|>[user]Q: 2+2?<|eos|>[assistant]Answer:",
                f.apply(List.of(new Message("user", "Q: 2+2?"), new Message("assistant", "Answer:")), false));
        // a trailing space the template keeps is kept
        assertEquals(
                "<|bos|>[user]Q<|eos|>[assistant]Answer: ",
                f.apply(List.of(new Message("user", "Q"), new Message("assistant", "Answer: ")), false));
        // a template that trims the message: cut after the stripped text
        ChatFormat trim = ChatFormat.select(
                folder("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] | trim }}</s>{% endfor %}"), tok, null);
        assertEquals(
                "<user>Q</s><assistant>Answer:",
                trim.apply(List.of(new Message("user", "Q"), new Message("assistant", "Answer: ")), false));
        // a template that drops the message cannot continue it
        ChatFormat drop = ChatFormat.select(folder("{% for m in messages %}{{ m['role'] }};{% endfor %}"), tok, null);
        assertThrows(
                IllegalArgumentException.class,
                () -> drop.apply(List.of(new Message("user", "Q"), new Message("assistant", "Answer:")), false));
    }

    @Test
    void aTemplateThatRefusesSystemIsAppliedWithoutIt() throws Exception {
        String noSystem = "{% for m in messages %}{% if m['role'] == 'system' %}"
                + "{{ raise_exception('System role not supported') }}{% endif %}<{{ m['role'] }}>{{ m['content'] }}"
                + "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
        ChatFormat f = ChatFormat.select(folder(noSystem), tok, null);
        assertEquals(
                "<user>Q<assistant>", f.apply(List.of(new Message("system", "S"), new Message("user", "Q")), true));
    }

    @Test
    void namedTemplatesAndTheDefault() throws Exception {
        ArrayNode list = OM.createArrayNode();
        list.addObject().put("name", "default").put("template", "D{{ messages[0]['content'] }}");
        list.addObject().put("name", "tool_use").put("template", "T{{ messages[0]['content'] }}");
        Path d = folder(list);
        List<Message> m = List.of(new Message("user", "x"));
        assertEquals("Dx", ChatFormat.select(d, tok, "").apply(m, true));
        assertEquals("Tx", ChatFormat.select(d, tok, "tool_use").apply(m, true));
        String err = assertThrows(IllegalArgumentException.class, () -> ChatFormat.select(d, tok, "chatml"))
                .getMessage();
        assertTrue(err.contains("chatml") && err.contains("[default, tool_use]"), err);
        // one template: used whatever name is given (lm-eval warns and uses it)
        assertEquals(
                "Px",
                ChatFormat.select(folder("P{{ messages[0]['content'] }}"), tok, "chatml")
                        .apply(m, true));
        // several without a default: a name is needed
        ArrayNode noDefault = OM.createArrayNode();
        noDefault.addObject().put("name", "a").put("template", "A");
        assertThrows(IllegalArgumentException.class, () -> ChatFormat.select(folder(noDefault), tok, null));
        // chat_template.jinja takes priority over tokenizer_config.json, as transformers loads it
        Files.writeString(d.resolve("chat_template.jinja"), "J{{ messages[0]['content'] }}");
        assertEquals("Jx", ChatFormat.select(d, tok, null).apply(m, true));
    }

    @Test
    void aModelWithoutATemplateIsRefusedNamingItsFolder() throws Exception {
        Path d = folder(null);
        String err = assertThrows(IllegalArgumentException.class, () -> ChatFormat.select(d, tok, null))
                .getMessage();
        assertTrue(err.contains(d.toString()) && err.contains("no chat template"), err);
        assertEquals(Map.of(), ChatFormat.templates(d));
    }

    /** A chat_template.jinja that links out of the folder is refused, naming it, before anything reads it. */
    @Test
    void aTemplateLinkedFromOutsideTheFolderIsRefusedUnread() throws Exception {
        Path d = folder(null);
        Path outside = Files.writeString(Files.createTempFile("secret", ".txt"), "SECRET {{ messages }}");
        try {
            Files.createSymbolicLink(d.resolve("chat_template.jinja"), outside);
            String err = assertThrows(
                            dev.scorch.engine.checkpoint.CheckpointException.class,
                            () -> ChatFormat.select(d, tok, null))
                    .getMessage();
            assertTrue(err.contains("chat_template.jinja") && err.contains("outside the model folder"), err);
            assertTrue(!err.contains("SECRET"), err);
        } finally {
            Files.delete(outside);
        }
    }
}
