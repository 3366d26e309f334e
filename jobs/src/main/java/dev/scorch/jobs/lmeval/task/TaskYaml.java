package dev.scorch.jobs.lmeval.task;

import java.io.IOException;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.AbstractConstruct;
import org.yaml.snakeyaml.constructor.SafeConstructor;
import org.yaml.snakeyaml.error.YAMLException;
import org.yaml.snakeyaml.nodes.Node;
import org.yaml.snakeyaml.nodes.ScalarNode;
import org.yaml.snakeyaml.nodes.Tag;

/**
 * Reads one lm-eval task or group YAML file the way lm-eval's loader does: YAML 1.1 scalars (as PyYAML reads
 * them), {@code include:} (one file or a list, relative to the including file, read recursively, a cycle
 * refused; the included files' keys merged in order, then the file's own keys win; an included file's
 * {@code task_list} is dropped), and {@code !function module.fn} read as a {@link FunctionRef}. Nothing is
 * imported or run.
 *
 * <p>Held to limits so that a hostile or broken file fails with a message instead of exhausting the driver:
 * {@link #MAX_FILE_BYTES} per file, {@link #MAX_DEPTH} levels of nesting, {@link #MAX_ALIASES} aliases, and
 * {@link #MAX_INCLUDE_DEPTH} files in one include chain.
 */
public final class TaskYaml {
    public static final int MAX_FILE_BYTES = 4 << 20;
    public static final int MAX_DEPTH = 64;
    public static final int MAX_ALIASES = 100;
    public static final int MAX_INCLUDE_DEPTH = 32;

    private TaskYaml() {}

    /** The file's mapping with its includes merged in. Errors name the file (and the include chain). */
    public static Map<String, Object> load(Path file) {
        return load(file.toAbsolutePath().normalize(), new LinkedHashSet<>());
    }

    private static Map<String, Object> load(Path file, Set<Path> chain) {
        if (chain.contains(file)) {
            throw new IllegalArgumentException(
                    file + ": include cycle: " + String.join(" -> ", names(chain)) + " -> " + file);
        }
        if (chain.size() >= MAX_INCLUDE_DEPTH) {
            throw new IllegalArgumentException(file + ": includes nest more than " + MAX_INCLUDE_DEPTH + " files deep");
        }
        Map<String, Object> cfg = parse(file);
        Object includes = cfg.remove("include");
        if (includes == null) {
            return cfg;
        }
        List<Object> list = includes instanceof List<?> l ? new ArrayList<>(l) : List.of(includes);
        Set<Path> inner = new LinkedHashSet<>(chain);
        inner.add(file);
        Map<String, Object> merged = new LinkedHashMap<>();
        for (Object inc : list) {
            if (!(inc instanceof String name) || name.isBlank()) {
                throw new IllegalArgumentException(file + ": field 'include' must be a file name or a list of them");
            }
            Path p = Path.of(name);
            Path target = (p.isAbsolute() ? p : file.getParent().resolve(p)).normalize();
            if (!Files.isRegularFile(target)) {
                throw new IllegalArgumentException(file + ": field 'include': " + target + " does not exist");
            }
            Map<String, Object> inc2 = load(target, inner);
            inc2.remove("task_list");
            merged.putAll(inc2);
        }
        merged.putAll(cfg);
        return merged;
    }

    private static List<String> names(Set<Path> chain) {
        List<String> out = new ArrayList<>();
        for (Path p : chain) {
            out.add(p.toString());
        }
        return out;
    }

    /** One file, includes not followed. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> parse(Path file) {
        String text;
        try {
            long size = Files.size(file);
            if (size > MAX_FILE_BYTES) {
                throw new IllegalArgumentException(
                        file + ": " + size + " bytes, over the limit of " + MAX_FILE_BYTES + " for a task file");
            }
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": cannot read: " + e.getMessage(), e);
        }
        Object root;
        try {
            root = yaml(file).load(new StringReader(text));
        } catch (YAMLException e) {
            throw new IllegalArgumentException(file + ": not valid YAML: " + firstLines(e.getMessage()), e);
        }
        if (!(root instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(file + ": expected a mapping at the top, got "
                    + (root == null ? "an empty file" : Py.typeName(root)));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (!(e.getKey() instanceof String k)) {
                throw new IllegalArgumentException(file + ": top-level key " + e.getKey() + " is not a string");
            }
            out.put(k, e.getValue());
        }
        return out;
    }

    private static Yaml yaml(Path file) {
        LoaderOptions options = new LoaderOptions();
        options.setMaxAliasesForCollections(MAX_ALIASES);
        options.setNestingDepthLimit(MAX_DEPTH);
        options.setCodePointLimit(MAX_FILE_BYTES);
        options.setAllowRecursiveKeys(false);
        return new Yaml(new Constructor(options, file));
    }

    private static String firstLines(String m) {
        if (m == null) {
            return "";
        }
        String[] lines = m.strip().split("\n");
        return String.join(" ", java.util.Arrays.copyOf(lines, Math.min(lines.length, 4)));
    }

    /** PyYAML's safe types plus {@code !function}; any other tag (Python objects) is refused by SafeConstructor. */
    private static final class Constructor extends SafeConstructor {
        Constructor(LoaderOptions options, Path file) {
            super(options);
            yamlConstructors.put(new Tag("!function"), new AbstractConstruct() {
                @Override
                public Object construct(Node node) {
                    if (!(node instanceof ScalarNode s)) {
                        throw new YAMLException("!function takes a name like module.fn");
                    }
                    return new FunctionRef(s.getValue().strip(), file);
                }
            });
        }
    }
}
