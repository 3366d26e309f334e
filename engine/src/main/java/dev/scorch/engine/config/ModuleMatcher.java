package dev.scorch.engine.config;

import dev.scorch.engine.runtime.CountingText;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * A compressed-tensors {@code targets} or {@code ignore} list, matched against module names (a tensor's name without its
 * {@code .weight}, e.g. {@code model.layers.3.mlp.experts.7.down_proj}) the way compressed-tensors' {@code match_name}
 * and {@code _match_class} do: an entry {@code re:P} matches where Python's {@code re.match(P, name)} does (anchored at
 * the start, not at the end), any other entry where it equals the name, and {@code Linear} also matches every
 * {@code nn.Linear} module by its class. Patterns come from an untrusted file: each match runs on a step budget, so a
 * pattern that backtracks without end fails naming the entry instead of hanging, and so do many patterns that each
 * backtrack a long way (a budget for all the matches of one list).
 */
public final class ModuleMatcher {
    public static final String LINEAR_CLASS = "Linear";
    /** Longest pattern accepted, far beyond real lists' (Kimi's longest: 38 characters). */
    static final int MAX_PATTERN = 1000;
    /** Entries accepted in one list (real lists: 1 to 10). */
    static final int MAX_ENTRIES = 1024;
    /** Characters one match may read before it is taken for runaway backtracking (a real one reads a few hundred). */
    static final long MATCH_BUDGET = 1_000_000;
    /**
     * Characters all the matches of one list may read: Kimi K2's 71,000 modules against a list of 10 patterns read about
     * 5·10⁸ (a few hundred a match); 20 times that is some seconds.
     */
    static final long LIST_BUDGET = 10_000_000_000L;

    private final String source;
    private final String field;
    private final List<String> entries;
    private final List<Pattern> patterns; // entry i compiled where it is a re: entry, else null
    private final java.util.concurrent.atomic.AtomicLong spent = new java.util.concurrent.atomic.AtomicLong();

    ModuleMatcher(String source, String field, List<String> entries, List<Pattern> patterns) {
        this.source = source;
        this.field = field;
        this.entries = List.copyOf(entries);
        this.patterns = java.util.Collections.unmodifiableList(new ArrayList<>(patterns));
    }

    /** The entries as written in config.json. */
    public List<String> entries() {
        return entries;
    }

    static ModuleMatcher parse(JsonFields f, String field, String label) {
        List<String> entries = f.stringList(field);
        if (entries.size() > MAX_ENTRIES) {
            throw f.error(field, "has " + entries.size() + " entries, more than the " + MAX_ENTRIES + " Scorch reads");
        }
        List<Pattern> patterns = new ArrayList<>();
        for (int i = 0; i < entries.size(); i++) {
            String e = entries.get(i);
            if (e.isEmpty() || e.length() > MAX_PATTERN) {
                throw f.error(field, "entry " + i + " must be 1 to " + MAX_PATTERN + " characters, got " + e.length());
            }
            if (e.startsWith("re:")) {
                String regex = e.substring(3);
                if (regex.isEmpty()) {
                    throw f.error(field, "entry " + i + " \"" + e + "\" has an empty regular expression");
                }
                try {
                    patterns.add(Pattern.compile(regex));
                } catch (PatternSyntaxException ex) {
                    throw f.error(
                            field,
                            "entry " + i + " \"" + e + "\" is not a regular expression Scorch reads: "
                                    + ex.getDescription());
                }
            } else {
                patterns.add(null);
            }
        }
        return new ModuleMatcher(f.source(), label, entries, patterns);
    }

    /** Whether some entry matches the module named {@code module}; {@code linear}: whether it is an nn.Linear. */
    public boolean matches(String module, boolean linear) {
        for (int i = 0; i < entries.size(); i++) {
            String e = entries.get(i);
            Pattern p = patterns.get(i);
            if (p != null ? lookingAt(p, module, e) : e.equals(module) || linear && e.equals(LINEAR_CLASS)) {
                return true;
            }
        }
        return false;
    }

    private boolean lookingAt(Pattern p, String name, String entry) {
        CountingText text = new CountingText(name, MATCH_BUDGET);
        try {
            return p.matcher(text).lookingAt();
        } catch (CountingText.TooManySteps ex) {
            throw new ConfigException(
                    source + ": field '" + field + "' entry \"" + entry + "\" takes more than " + MATCH_BUDGET
                            + " steps to match the module name '" + name + "' (a pattern that backtracks without end)");
        } finally {
            if (spent.addAndGet(MATCH_BUDGET - Math.max(0, text.left())) > LIST_BUDGET) {
                throw new ConfigException(source + ": field '" + field + "': its patterns took more than " + LIST_BUDGET
                        + " steps to match the model's module names (patterns that backtrack a long way)");
            }
        }
    }
}
