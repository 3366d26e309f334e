package dev.scorch.jobs.eval;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * perplexity: documents (text with BOS, or token ids). A document longer than max_length is scored in windows of
 * max_length tokens that start stride tokens apart; each window scores only the tokens the previous ones did not,
 * with the rest of it as context carried over (the sliding-window evaluation of fixed-length models). Every token
 * but the first is scored exactly once. Corpus figures: token perplexity exp(Σ nll / Σ tokens) and bits per byte
 * Σ nll / (ln 2 · Σ UTF-8 bytes) (text data only); their standard errors by bootstrap over documents. Roles: text,
 * id (optional).
 */
final class PerplexityTask extends ScoredTask {
    static final StructType EXAMPLES = new StructType()
            .add("example_id", DataTypes.StringType)
            .add("num_tokens", DataTypes.LongType)
            .add("num_bytes", DataTypes.LongType)
            .add("nll", DataTypes.DoubleType)
            .add("perplexity", DataTypes.DoubleType)
            .add("bits_per_byte", DataTypes.DoubleType)
            .add("windows", DataTypes.IntegerType)
            .add("error", DataTypes.StringType);

    /** Window w of a document: its rows' tokens start at begin; positions from scoreFrom (window index) on are new. */
    private record Window(int begin, int scoreFrom) {}

    private final List<List<Window>> windows = new ArrayList<>();
    private final long[] bytes; // -1 for token-id documents

    PerplexityTask(EvalData data) {
        super(data);
        bytes = new long[data.size()];
        for (int i = 0; i < data.size(); i++) {
            windows.add(List.of());
        }
        prepareAll();
    }

    @Override
    void prepare(int i) {
        Object v = data.value(i, "text");
        int[] tokens = data.tokens(v, "text", true);
        if (tokens.length < 2) {
            throw new IllegalArgumentException("a document needs at least 2 tokens to score, it has " + tokens.length);
        }
        bytes[i] = v instanceof String s ? s.getBytes(StandardCharsets.UTF_8).length : -1;
        int maxLength = data.task.maxLength();
        List<Window> ws = new ArrayList<>();
        int prevEnd = 1; // the first token has nothing before it
        for (int begin = 0; ; begin += data.task.stride()) {
            int end = Math.min(begin + maxLength, tokens.length);
            if (end > prevEnd) {
                ws.add(new Window(begin, prevEnd - begin));
                add(i, ws.size() - 1, java.util.Arrays.copyOfRange(tokens, begin, end));
                prevEnd = end;
            }
            if (end == tokens.length) {
                break;
            }
        }
        windows.set(i, ws);
    }

    @Override
    public Result finish(Map<String, Scored> scored, Map<String, Generated> generated) {
        List<Row> examples = new ArrayList<>();
        List<double[]> ok = new ArrayList<>(); // {nll, tokens, bytes}
        for (int i = 0; i < data.size(); i++) {
            String err = errors[i];
            double nll = 0;
            long count = 0;
            List<Window> ws = windows.get(i);
            for (int w = 0; w < ws.size() && err == null; w++) {
                Scored s = TaskRun.resultOf(scored, rowId(i, w));
                if (s.error() != null) {
                    err = "window " + w + ": " + s.error();
                    break;
                }
                for (int k = ws.get(w).scoreFrom(); k < s.tokenLogprobs().length; k++) {
                    nll -= s.tokenLogprobs()[k];
                    count++;
                }
            }
            if (err != null) {
                examples.add(RowFactory.create(data.id(i), null, null, null, null, null, null, err));
                continue;
            }
            Double bpb = bytes[i] > 0 ? nll / (Math.log(2) * bytes[i]) : null;
            examples.add(RowFactory.create(
                    data.id(i),
                    count,
                    bytes[i] < 0 ? null : bytes[i],
                    nll,
                    Math.exp(nll / count),
                    bpb,
                    ws.size(),
                    null));
            ok.add(new double[] {nll, count, bytes[i]});
        }
        long failed = data.size() - ok.size();
        List<Metric> metrics = new ArrayList<>();
        int n = ok.size();
        metrics.add(new Metric(
                "perplexity",
                perplexity(ok, identity(n)),
                Stats.bootstrap(n, idx -> perplexity(ok, idx)),
                Stats.BOOTSTRAP,
                n,
                failed,
                false));
        if (ok.stream().allMatch(d -> d[2] > 0) && n > 0) {
            metrics.add(new Metric(
                    "bits_per_byte",
                    bitsPerByte(ok, identity(n)),
                    Stats.bootstrap(n, idx -> bitsPerByte(ok, idx)),
                    Stats.BOOTSTRAP,
                    n,
                    failed,
                    false));
        }
        return new Result(EXAMPLES, examples, metrics);
    }

    private static int[] identity(int n) {
        int[] idx = new int[n];
        for (int i = 0; i < n; i++) {
            idx[i] = i;
        }
        return idx;
    }

    private static double perplexity(List<double[]> docs, int[] idx) {
        double nll = 0;
        double tokens = 0;
        for (int i : idx) {
            nll += docs.get(i)[0];
            tokens += docs.get(i)[1];
        }
        return Math.exp(nll / tokens);
    }

    private static double bitsPerByte(List<double[]> docs, int[] idx) {
        double nll = 0;
        double bytes = 0;
        for (int i : idx) {
            nll += docs.get(i)[0];
            bytes += docs.get(i)[2];
        }
        return nll / (Math.log(2) * bytes);
    }
}
