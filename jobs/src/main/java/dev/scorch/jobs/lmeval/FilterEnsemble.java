package dev.scorch.jobs.lmeval;

import java.util.List;
import java.util.Map;

/**
 * A named filter pipeline from a task's filter_list: its filters applied in order to each document's responses. A task
 * without filter_list gets lm-eval's default, "none" = [take_first]. take_first must come last: lm-eval would then
 * hand a bare string to the next filter, which iterates its characters; such pipelines are refused.
 */
public record FilterEnsemble(String name, List<ResponseFilter> filters) {
    public FilterEnsemble {
        filters = List.copyOf(filters);
        for (int i = 0; i < filters.size() - 1; i++) {
            if (filters.get(i).takesFirst()) {
                throw new IllegalArgumentException(
                        "filter pipeline '" + name + "': take_first must be the last filter (step " + (i + 1) + ")");
            }
        }
    }

    /** lm-eval's default when a task names no filters. */
    public static FilterEnsemble none() {
        return new FilterEnsemble("none", List.of(ResponseFilter.named("take_first", null)));
    }

    /** One filter_list entry: a name and its filter steps as (function, kwargs) from the YAML. */
    public static FilterEnsemble of(String name, List<Map.Entry<String, Map<String, Object>>> steps) {
        return new FilterEnsemble(
                name,
                steps.stream()
                        .map(s -> ResponseFilter.named(s.getKey(), s.getValue()))
                        .toList());
    }

    /** The filtered responses of one document. */
    public List<String> apply(List<String> responses) {
        List<String> r = responses;
        for (ResponseFilter f : filters) {
            r = f.apply(r);
        }
        return r;
    }

    /** Whether lm-eval's filtered result is one string (the pipeline ends with take_first) rather than a list. */
    public boolean yieldsOne() {
        return !filters.isEmpty() && filters.get(filters.size() - 1).takesFirst();
    }
}
