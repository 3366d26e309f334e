package dev.scorch.jobs.lmeval;

import java.util.List;

/**
 * lm-eval's exact_match for generate_until (HF evaluate's, ported): each regex in regexes_to_ignore removed from both
 * strings in order, then lower-casing, then ASCII punctuation ({@code string.punctuation}) removed, then ASCII digits
 * removed, each when asked; 1.0 when prediction and reference are then equal. With several references (multiple
 * targets) 1.0 when any is.
 */
public record ExactMatch(
        List<String> regexesToIgnore, boolean ignoreCase, boolean ignorePunctuation, boolean ignoreNumbers) {
    private static final String PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

    public ExactMatch {
        regexesToIgnore = regexesToIgnore == null ? List.of() : List.copyOf(regexesToIgnore);
        for (String r : regexesToIgnore) {
            PyRegex.compile(r);
        }
    }

    public static ExactMatch plain() {
        return new ExactMatch(List.of(), false, false, false);
    }

    public double score(String prediction, List<String> references) {
        String p = normalize(prediction);
        for (String r : references) {
            if (p.equals(normalize(r))) {
                return 1.0;
            }
        }
        return 0.0;
    }

    /**
     * exact_match of a list of responses (a filter pipeline that does not end in take_first, e.g. several repeats),
     * as numpy's element-wise comparison in lm-eval computes it: one reference, the fraction of responses equal to it;
     * several (multiple targets), 1.0 when response j equals reference j for some j (one response: any reference; one
     * reference: any response). Other shapes make numpy fail in lm-eval and are refused; so are regexes_to_ignore,
     * which lm-eval cannot apply to a list.
     */
    public double scoreAll(List<String> predictions, List<String> references, boolean multipleTargets) {
        if (!regexesToIgnore.isEmpty()) {
            throw new IllegalArgumentException("exact_match with regexes_to_ignore on a list of responses (a filter"
                    + " pipeline not ending in take_first): lm-eval fails on it (TypeError)");
        }
        int k = predictions.size();
        int g = references.size();
        if (!multipleTargets) {
            String ref = normalize(references.get(0));
            double hits = 0;
            for (String p : predictions) {
                hits += normalize(p).equals(ref) ? 1 : 0;
            }
            return hits / k;
        }
        if (k != g && k != 1 && g != 1) {
            throw new IllegalArgumentException("exact_match of " + k + " responses against " + g
                    + " targets: numpy cannot compare them element-wise (lm-eval fails)");
        }
        for (int j = 0; j < Math.max(k, g); j++) {
            if (normalize(predictions.get(k == 1 ? 0 : j)).equals(normalize(references.get(g == 1 ? 0 : j)))) {
                return 1.0;
            }
        }
        return 0.0;
    }

    public double score(String prediction, String reference) {
        return score(prediction, List.of(reference));
    }

    String normalize(String s) {
        for (String r : regexesToIgnore) {
            s = PyRegex.compile(r).removeAll(s);
        }
        if (ignoreCase) {
            s = PyText.lower(s);
        }
        if (ignorePunctuation) {
            s = remove(s, PUNCTUATION);
        }
        if (ignoreNumbers) {
            s = remove(s, "0123456789");
        }
        return s;
    }

    private static String remove(String s, String chars) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            if (chars.indexOf(s.charAt(i)) < 0) {
                b.append(s.charAt(i));
            }
        }
        return b.toString();
    }
}
