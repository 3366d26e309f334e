package dev.scorch.jobs.lmeval.task;

import dev.scorch.engine.tokenizer.ChatTemplate;
import java.util.List;

/**
 * One request to the model, as lm-eval's Instance: which task and document (its index in the eval split), its
 * index among the document's requests (a multiple_choice document has one per choice), the request type, and
 * the arguments.
 *
 * @param type         loglikelihood (also each choice of a multiple_choice task), loglikelihood_rolling or
 *                     generate_until
 * @param context      the prompt as text; null for loglikelihood_rolling, and where {@code chat} holds it until the
 *                     chat template is applied ({@link #withContext})
 * @param chat         with --apply_chat_template, the messages for the model's chat template; else null
 * @param continuation loglikelihood: the text whose log-likelihood follows the context; rolling: the whole text
 * @param generation   generate_until: the generation kwargs; else null
 * @param repeats      the task's repeats (generate_until samples this many times)
 */
public record LmRequest(
        String task,
        int docId,
        int index,
        OutputType type,
        String context,
        ChatPrompt chat,
        String continuation,
        TaskConfig.GenerationKwargs generation,
        int repeats) {

    /** This request with its context given: the chat messages rendered through the model's template. */
    public LmRequest withContext(String text) {
        return new LmRequest(task, docId, index, type, text, chat, continuation, generation, repeats);
    }

    /**
     * Messages for a chat template. {@code addGenerationPrompt} is true unless the prompt ends in an assistant
     * message holding gen_prefix, which the model continues (lm-eval then renders with continue_final_message).
     */
    public record ChatPrompt(List<ChatTemplate.Message> messages, boolean addGenerationPrompt) {}
}
