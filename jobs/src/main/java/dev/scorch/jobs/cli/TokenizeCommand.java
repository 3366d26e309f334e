package dev.scorch.jobs.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.scorch.engine.tokenizer.ChatTemplate;
import dev.scorch.engine.tokenizer.Tokenizer;
import dev.scorch.engine.tokenizer.Tokenizers;
import dev.scorch.jobs.output.FileKinds;
import dev.scorch.jobs.output.OutputLease;
import dev.scorch.jobs.output.PathGuard;
import dev.scorch.jobs.output.WriteMode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

@Command(
        name = "tokenize",
        mixinStandardHelpOptions = true,
        description = {
            "Tokenizes a JSONL file with a checkpoint's own tokenizer (tokenizer.json or tiktoken.model), no Spark.",
            "In: lines {\"id\", \"text\"} or {\"id\", \"messages\": [{\"role\", \"content\"}, ...]} (rendered with the",
            "chat template, generation prompt added). Out: {\"id\", \"token_ids\", \"num_tokens\"}, or {\"id\", \"error\"}."
        },
        footer = {
            "",
            "Examples:",
            "  bin/scorch tokenize --tokenizer /data/DeepSeek-V3 --input texts.jsonl --output ids.jsonl --overwrite",
            "  bin/scorch tokenize --tokenizer /data/Kimi-K2-Instruct --input chats.jsonl --output ids.jsonl --add-special-tokens"
        })
public final class TokenizeCommand implements Callable<Integer> {
    @Option(
            names = "--tokenizer",
            required = true,
            description =
                    "Folder with tokenizer.json or tiktoken.model and tokenizer_config.json (a checkpoint folder).")
    Path tokenizer;

    @Option(names = "--input", required = true, description = "JSONL input.")
    Path input;

    @Option(names = "--output", required = true, description = "JSONL output file, written whole or not at all.")
    Path output;

    @Option(names = "--overwrite", description = "Replace an existing output that this command wrote.")
    boolean overwrite;

    @Option(
            names = "--force-overwrite",
            description = "With --overwrite: replace the output file whatever it holds"
                    + " (never the input or a file of the tokenizer folder).")
    boolean forceOverwrite;

    @Option(
            names = "--add-special-tokens",
            description = "Add BOS/EOS as tokenizer_config.json says (text rows; a rendered chat has its own).")
    boolean addSpecialTokens;

    @Override
    public Integer call() throws Exception {
        Tokenizer tok = Tokenizers.load(tokenizer)
                .orElseThrow(() -> new IllegalArgumentException(tokenizer + ": no tokenizer.json or tiktoken.model"));
        Path partial = prepareOutput();
        // One writer per output file: the lease beside it is held until the file is in place.
        try (OutputLease lease = OutputLease.acquire(
                FileSystem.getLocal(new Configuration()),
                new org.apache.hadoop.fs.Path(output.toAbsolutePath().toUri()),
                "tokenize",
                OutputLease.Policy.DEFAULT)) {
            return tokenize(tok, partial, lease);
        }
    }

    private Integer tokenize(Tokenizer tok, Path partial, OutputLease lease) throws Exception {
        ObjectMapper json = new ObjectMapper();
        long rows = 0;
        long tokens = 0;
        long errors = 0;
        long t0 = System.nanoTime();
        try (BufferedReader in = Files.newBufferedReader(input);
                BufferedWriter out = Files.newBufferedWriter(partial)) {
            int lineNo = 0;
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                lineNo++;
                if (line.isBlank()) {
                    continue;
                }
                ObjectNode o = json.createObjectNode();
                String where = input.getFileName() + ":" + lineNo; // every error names its file:line, and id when known
                o.put("id", where); // the row's own id replaces it once the line is read
                try {
                    JsonNode row;
                    try {
                        row = json.readTree(line);
                    } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                        var at = e.getLocation();
                        throw new IllegalArgumentException(where + ": not valid JSON"
                                + (at == null || at.getColumnNr() < 0 ? "" : " (column " + at.getColumnNr() + ")"));
                    }
                    if (row == null || !row.isObject()) {
                        throw new IllegalArgumentException(where + ": not a JSON object");
                    }
                    if (row.hasNonNull("id")) {
                        o.set("id", row.get("id"));
                        where += " (id " + row.get("id") + ")";
                    }
                    int[] ids;
                    try {
                        ids = encode(tok, row);
                    } catch (RuntimeException e) {
                        throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
                    }
                    var arr = o.putArray("token_ids");
                    for (int id : ids) {
                        arr.add(id);
                    }
                    o.put("num_tokens", ids.length);
                    tokens += ids.length;
                } catch (RuntimeException e) {
                    o.put("error", e.getMessage());
                    errors++;
                }
                out.write(json.writeValueAsString(o));
                out.newLine();
                rows++;
            }
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(partial);
            throw e;
        }
        lease.requireHeld();
        FileKinds.requireFileOrFolder("--output", output); // checked again: it may have been made a link meanwhile
        Files.move(partial, output, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf(
                "tokenized %,d rows (%,d errors), %,d tokens in %.2f s (%,.0f tokens/s)%n",
                rows, errors, tokens, secs, tokens / secs);
        return 0;
    }

    /**
     * Checks the output against the input and the tokenizer folder and what --overwrite allows, and returns the partial
     * file the rows go to: a hidden sibling of the output, moved over it in one step when every row is written, so a
     * failed run leaves an old output (or the input, however the paths are spelled) as it was.
     */
    Path prepareOutput() throws IOException {
        WriteMode mode = WriteMode.of(overwrite, forceOverwrite, false);
        if (!Files.isRegularFile(input)) {
            throw new IllegalArgumentException("--input " + input + " is not a file");
        }
        new PathGuard(FileSystem.getLocal(new Configuration()))
                .input("the input", input)
                .input("the tokenizer folder", tokenizer)
                .check("--output", output.toString());
        FileKinds.requireFileOrFolder("--output", output);
        if (Files.isDirectory(output)) {
            throw new IllegalArgumentException("--output " + output + " is a folder; tokenize writes one JSONL file");
        }
        if (Files.exists(output)) {
            if (!mode.overwrites()) {
                throw new IllegalArgumentException("--output " + output + " exists; add --overwrite to replace it");
            }
            if (mode == WriteMode.OVERWRITE && !looksTokenized(output)) {
                throw new IllegalArgumentException(
                        "--output " + output + " does not look like tokenize output (JSON lines of id, token_ids,"
                                + " num_tokens, error); --overwrite replaces only that. Choose another output, or add --force-overwrite");
            }
        }
        Path dir = output.toAbsolutePath().getParent();
        Files.createDirectories(dir);
        return dir.resolve("." + output.getFileName() + ".scorch-partial");
    }

    /** Whether a file is empty or starts with a line this command writes. */
    static boolean looksTokenized(Path file) throws IOException {
        try (BufferedReader r = Files.newBufferedReader(file)) {
            String line;
            while ((line = r.readLine()) != null && line.isBlank()) {
                // skip blank lines
            }
            if (line == null) {
                return true;
            }
            try {
                JsonNode n = new ObjectMapper().readTree(line);
                if (!n.isObject() || !n.has("id")) {
                    return false;
                }
                for (var it = n.fieldNames(); it.hasNext(); ) {
                    if (!OUTPUT_FIELDS.contains(it.next())) {
                        return false;
                    }
                }
                return true;
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                return false;
            }
        }
    }

    private static final java.util.Set<String> OUTPUT_FIELDS =
            java.util.Set.of("id", "token_ids", "num_tokens", "error");

    private int[] encode(Tokenizer tok, JsonNode row) {
        if (row.hasNonNull("text")) {
            return tok.encode(row.get("text").asText(), addSpecialTokens);
        }
        if (row.hasNonNull("messages")) {
            ChatTemplate template = tok.chatTemplate()
                    .orElseThrow(() ->
                            new IllegalArgumentException("messages given but the tokenizer has no chat_template"));
            List<ChatTemplate.Message> messages = new ArrayList<>();
            for (JsonNode m : row.get("messages")) {
                messages.add(new ChatTemplate.Message(
                        m.path("role").asText(), m.path("content").asText()));
            }
            // The rendered chat carries its own BOS text, so nothing more is added.
            return tok.encode(template.render(messages, true), false);
        }
        throw new IllegalArgumentException("neither \"text\" nor \"messages\"");
    }
}
