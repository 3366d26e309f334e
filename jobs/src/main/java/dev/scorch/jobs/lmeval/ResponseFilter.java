package dev.scorch.jobs.lmeval;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One of lm-eval's response filters, applied to one document's responses (lm-eval applies each to every document's
 * list of responses, one per repeat). Supported: regex (regex_pattern, group_select, fallback), take_first,
 * take_first_k (k), majority_vote, lowercase, uppercase, remove_whitespace.
 */
public interface ResponseFilter {
    List<String> apply(List<String> responses);

    /** Whether this filter reduces the responses to the first one (take_first), after which lm-eval holds a string. */
    default boolean takesFirst() {
        return false;
    }

    /** The filter lm-eval registers under this name, with the YAML's arguments; unknown names and kwargs refused. */
    static ResponseFilter named(String function, Map<String, Object> kwargs) {
        Map<String, Object> args = kwargs == null ? Map.of() : kwargs;
        switch (function) {
            case "regex" -> {
                for (String k : args.keySet()) {
                    if (!List.of("regex_pattern", "group_select", "fallback").contains(k)) {
                        throw new IllegalArgumentException("regex filter: unknown argument '" + k + "'");
                    }
                }
                String pattern = (String) args.getOrDefault("regex_pattern", RegexFilter.DEFAULT_PATTERN);
                int group = ((Number) args.getOrDefault("group_select", 0)).intValue();
                String fallback = (String) args.getOrDefault("fallback", "[invalid]");
                return new RegexFilter(PyRegex.compile(pattern), group, fallback);
            }
            case "take_first_k" -> {
                if (!(args.get("k") instanceof Number k) || args.size() != 1) {
                    throw new IllegalArgumentException("take_first_k filter takes one argument k, got " + args);
                }
                int n = k.intValue();
                return r -> {
                    if (r.size() < n) {
                        throw new IllegalArgumentException("take_first_k: " + n + " responses asked for, but there are "
                                + r.size() + " (raise the task's repeats)");
                    }
                    return List.copyOf(r.subList(0, n));
                };
            }
            case "majority_vote" -> {
                if (!args.isEmpty()) {
                    throw new IllegalArgumentException("majority_vote filter takes no arguments, got " + args.keySet());
                }
                return ResponseFilter::majority;
            }
            case "take_first", "lowercase", "uppercase", "remove_whitespace" -> {
                if (!args.isEmpty()) {
                    throw new IllegalArgumentException(function + " filter takes no arguments, got " + args.keySet());
                }
                return switch (function) {
                    case "take_first" ->
                        new ResponseFilter() {
                            @Override
                            public List<String> apply(List<String> r) {
                                return List.of(r.get(0));
                            }

                            @Override
                            public boolean takesFirst() {
                                return true;
                            }
                        };
                    case "lowercase" -> r -> r.stream().map(PyText::lower).toList();
                    case "uppercase" -> r -> r.stream().map(PyText::upper).toList();
                    default -> r -> r.stream().map(PyText::strip).toList();
                };
            }
            default ->
                throw new IllegalArgumentException("filter '" + function + "' is not supported (supported:"
                        + " regex, take_first, take_first_k, majority_vote, lowercase, uppercase, remove_whitespace)");
        }
    }

    /** majority_vote: the most frequent response, a tie going to the one seen first (Counter.most_common(1)). */
    static List<String> majority(List<String> responses) {
        Map<String, Integer> counts = new LinkedHashMap<>();
        for (String r : responses) {
            counts.merge(r, 1, Integer::sum);
        }
        String vote = null;
        int best = 0;
        for (Map.Entry<String, Integer> e : counts.entrySet()) {
            if (e.getValue() > best) {
                vote = e.getKey();
                best = e.getValue();
            }
        }
        return Collections.singletonList(vote);
    }

    /**
     * lm-eval's RegexFilter: per response, {@code findall}; none → fallback; else the match at group_select (Python
     * indexing, so -1 is the last); a match of several groups gives its first non-empty group, or the fallback; the
     * result stripped (a fallback taken for a match of empty groups is stripped too, one taken for no match is not).
     */
    record RegexFilter(PyRegex regex, int groupSelect, String fallback) implements ResponseFilter {
        public static final String DEFAULT_PATTERN = "#### (\\-?[0-9\\.\\,]+)";

        @Override
        public List<String> apply(List<String> responses) {
            List<String> out = new ArrayList<>(responses.size());
            for (String resp : responses) {
                List<List<String>> matches = regex.findall(resp == null ? "" : resp);
                if (matches.isEmpty()) {
                    out.add(fallback);
                    continue;
                }
                int i = groupSelect < 0 ? groupSelect + matches.size() : groupSelect;
                if (i < 0 || i >= matches.size()) {
                    throw new IndexOutOfBoundsException("regex filter '" + regex.python() + "': group_select "
                            + groupSelect + " but only " + matches.size() + " matches (lm-eval raises IndexError)");
                }
                List<String> m = matches.get(i);
                String picked;
                if (m.size() == 1) {
                    picked = m.get(0);
                } else {
                    picked = m.stream().filter(s -> !s.isEmpty()).findFirst().orElse(fallback);
                }
                out.add(PyText.strip(picked));
            }
            return out;
        }
    }
}
